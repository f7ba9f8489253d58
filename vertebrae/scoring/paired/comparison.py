"""``compare_units``: intervals and paired tests for every candidate and every pair, on shared resamples.

Every reducer is a function of per-stratum feature totals, so one block of B_block resample rows (bootstrap
counts, or swap bits) times the stratum-ordered features ``X`` ``(n, m F)`` gives the totals of every
candidate in that block: one matrix product per stratum and block. A bootstrap row's pair delta is
``t*_a - t*_b``; a swap row's swapped totals are ``T_a + S X_b - S X_a`` (and ``T_b + S X_a - S X_b``), so
one product ``S X`` serves all pairs. Blocks are bounded by ``block_bytes`` (the float64 block matrix), so
memory stays bounded whatever n; the bootstrap distributions kept for the intervals take
``8 B (m + m(m-1)/2)`` bytes.
"""

from __future__ import annotations

import os
from itertools import combinations

import numpy as np

from vertebrae.core.errors import ValidationError
from vertebrae.scoring.paired.config import ComparisonConfig
from vertebrae.scoring.paired.jackknife import accelerations
from vertebrae.scoring.paired.reducers import statistic
from vertebrae.scoring.paired.resampling import BLOCK_BYTES, block_rows, blocks, intervals
from vertebrae.scoring.paired.result import PairedComparison
from vertebrae.scoring.paired.significance import (
    adjust,
    mcnemar_exact,
    mcnemar_min_p,
    randomization_p,
    tail_counts,
    verdict,
)
from vertebrae.scoring.paired.units import PairedUnits

_PAIR_ELEMENTS = 2_000_000


class _Prepared:
    """The stratum-ordered layout of one ``PairedUnits``."""

    def __init__(self, units: PairedUnits) -> None:
        m, n, f = units.values.shape
        order, bounds = units.stratum_layout()
        self.m, self.n, self.f = m, n, f
        self.reducer = units.reducer
        self.bounds = bounds
        self.n_strata = len(bounds) - 1
        self.sizes = np.diff(bounds).astype(np.float64)[:, None]
        self.x3 = np.ascontiguousarray(units.values[:, order, :].transpose(1, 0, 2))  # (n, m, F)
        self.x = self.x3.reshape(n, m * f)
        self.totals = units.point_totals()  # (S, m, F)
        self.point = statistic(self.reducer, self.totals, self.sizes)
        pairs = np.array(list(combinations(range(m), 2)), dtype=np.int64).reshape(-1, 2)
        self.ia, self.ib = pairs[:, 0], pairs[:, 1]

    def block_totals(self, block: np.ndarray) -> np.ndarray:
        """``(rows, S, m, F)``: ``block[:, stratum] @ X[stratum]`` per stratum."""
        out = np.empty((block.shape[0], self.n_strata, self.m, self.f))
        for s in range(self.n_strata):
            lo, hi = self.bounds[s], self.bounds[s + 1]
            out[:, s] = (block[:, lo:hi] @ self.x[lo:hi]).reshape(-1, self.m, self.f)
        return out


def _workers(workers: int | None) -> int:
    if workers is None:
        return max(1, min(4, len(os.sched_getaffinity(0))))
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise ValidationError(f"compare_units: workers must be a positive integer, got {workers!r}")
    return workers


def _bootstrap(prep: _Prepared, config: ComparisonConfig, rows: int, workers: int) -> np.ndarray:
    """``(B, m)``: each candidate's statistic on every bootstrap resample."""
    dist = np.empty((config.resamples, prep.m))
    for start, block in blocks("bootstrap", config.resamples, prep.n, prep.bounds, config.seed,
                               rows_per_block=rows, workers=workers):
        dist[start:start + block.shape[0]] = statistic(prep.reducer, prep.block_totals(block), prep.sizes)
    return dist


def _randomization(prep: _Prepared, pairs: np.ndarray, observed: np.ndarray, config: ComparisonConfig,
                   exact: bool, rows: int, workers: int) -> np.ndarray:
    """Two-sided randomization p-values of the selected pairs (indices into the pair list)."""
    total = 2 ** prep.n if exact else config.resamples
    ia, ib = prep.ia[pairs], prep.ib[pairs]
    less, greater = np.zeros(pairs.size, dtype=np.int64), np.zeros(pairs.size, dtype=np.int64)
    base = prep.totals[None]
    for _, block in blocks("exact" if exact else "swap", total, prep.n, prep.bounds, config.seed,
                           rows_per_block=rows, workers=workers):
        swapped = prep.block_totals(block)  # (rows, S, m, F)
        step = max(1, _PAIR_ELEMENTS // (block.shape[0] * prep.n_strata * prep.f))
        for lo in range(0, pairs.size, step):
            a, b = ia[lo:lo + step], ib[lo:lo + step]
            t_a = base[:, :, a] + swapped[:, :, b] - swapped[:, :, a]
            t_b = base[:, :, b] + swapped[:, :, a] - swapped[:, :, b]
            null = statistic(prep.reducer, t_a, prep.sizes) - statistic(prep.reducer, t_b, prep.sizes)
            counts = tail_counts(null, observed[lo:lo + step])
            less[lo:lo + step] += counts[0]
            greater[lo:lo + step] += counts[1]
    return randomization_p(less, greater, total, exact)


_PLURAL = {"query": "queries", "class": "classes"}


def _notes(units: PairedUnits, config: ComparisonConfig, tests: list[str], min_p: np.ndarray,
           bca_notes: list[str]) -> list[str]:
    n, n_pairs = units.n_units, len(tests)
    unit = _PLURAL.get(units.unit, f"{units.unit}s") if n != 1 else units.unit
    notes = []
    if n < 20:
        notes.append(f"Only {n} {unit}: intervals and p-values rest on few units and are coarse.")
    threshold = config.alpha if config.adjustment == "none" or n_pairs == 1 else config.alpha / n_pairs
    where = "" if threshold == config.alpha else f" ({config.adjustment} across {n_pairs} pairs: alpha/{n_pairs})"
    for test in dict.fromkeys(tests):
        worst = max(p for t, p in zip(tests, min_p) if t == test)
        if worst <= threshold:
            continue
        if test == "randomization-exact":
            how = f"enumerates all 2^{n} = {2 ** n} swaps of the {n} {unit}, so its smallest p-value is 2/{2 ** n}"
        elif test == "randomization":
            how = f"draws {config.resamples} swaps, so its smallest p-value is 2/{config.resamples + 1}"
        else:
            how = "has few discordant units on some pairs, so its smallest p-value is 2 * 0.5^(b+c)"
        notes.append(f"The {test} test {how} = {worst:.3g}, above the significance threshold {threshold:.3g}"
                     f"{where}: such pairs cannot be called different.")
    return notes + bca_notes


def compare_units(units: PairedUnits, config: ComparisonConfig, *, block_bytes: int = BLOCK_BYTES,
                  workers: int | None = None) -> PairedComparison:
    """Every candidate's point value and bootstrap interval, and for every pair (a, b), a before b in
    candidate order: delta = point[a] - point[b], its paired bootstrap interval, a paired test, and p-values
    adjusted across all pairs.

    One set of resamples (stratified bootstrap rows and swap rows, from ``config.seed``) serves every
    candidate and pair. The test is McNemar's exact test when the reducer is "mean", there is one stratum and
    both candidates' values are all 0/1; otherwise the paired randomization test (swap the two candidates'
    values per unit with probability 1/2; statistic delta), exact over all ``2**n`` swaps when ``2**n <=
    resamples``. ``block_bytes`` bounds the resample block (results do not depend on it); ``workers`` threads
    draw its chunks (default: the usable cores, at most 4).
    """
    if not isinstance(units, PairedUnits):
        raise ValidationError(f"compare_units needs PairedUnits, got {type(units).__name__}")
    if not isinstance(config, ComparisonConfig):
        raise ValidationError(f"compare_units needs a ComparisonConfig, got {type(config).__name__}")
    workers = _workers(workers)
    prep = _Prepared(units)
    rows = block_rows(prep.n, block_bytes)
    point, ia, ib = prep.point, prep.ia, prep.ib
    delta = point[ia] - point[ib]
    values = units.values
    identical = np.array([np.array_equal(values[a], values[b]) for a, b in zip(ia, ib)], dtype=bool)

    dist_c = _bootstrap(prep, config, rows, workers)
    dist_p = dist_c[:, ia] - dist_c[:, ib]
    accel_c = accel_p = None
    bca_notes: list[str] = []
    method = config.interval
    if method == "bca":
        if prep.sizes.min() < 2:
            method = "percentile"
            bca_notes.append("BCa needs at least 2 units in every stratum; percentile intervals are reported.")
        else:
            accel_c, accel_p = accelerations(prep.reducer, prep.x3, prep.totals, prep.bounds, ia, ib)
    low_c, high_c, back_c = intervals(dist_c, point, config.confidence_level, method, accel_c)
    low_p, high_p, back_p = intervals(dist_p, delta, config.confidence_level, method, accel_p)
    low_p, high_p = np.where(identical, 0.0, low_p), np.where(identical, 0.0, high_p)
    fell_back = [units.candidates[i] for i in np.flatnonzero(back_c)]
    fell_back += [f"{units.candidates[a]} vs {units.candidates[b]}"
                  for a, b in zip(ia[back_p & ~identical], ib[back_p & ~identical])]
    if fell_back:
        bca_notes.append(f"The BCa interval is undefined (the point lies outside the bootstrap distribution) for "
                         f"{', '.join(fell_back)}; the percentile interval is reported there.")

    n, n_pairs = prep.n, ia.size
    binary = ((values == 0) | (values == 1)).all(axis=(1, 2))
    mcnemar = (prep.reducer == "mean") & (prep.n_strata == 1) & binary[ia] & binary[ib]
    exact = n < 63 and 2 ** n <= config.resamples
    randomized = "randomization-exact" if exact else "randomization"
    tests = ["mcnemar-exact" if flag else randomized for flag in mcnemar]
    p_value = np.ones(n_pairs)
    min_p = np.full(n_pairs, min(1.0, 2.0 / 2 ** n) if exact else 2.0 / (config.resamples + 1))
    for k in np.flatnonzero(mcnemar):
        a, b = values[ia[k], :, 0], values[ib[k], :, 0]
        b_count, c_count = int(np.count_nonzero((a == 1) & (b == 0))), int(np.count_nonzero((a == 0) & (b == 1)))
        p_value[k] = mcnemar_exact(b_count, c_count)
        min_p[k] = mcnemar_min_p(b_count + c_count)
    todo = np.flatnonzero(~mcnemar & ~identical)
    if todo.size:
        p_value[todo] = _randomization(prep, todo, delta[todo], config, exact, rows, workers)
    p_adjusted = adjust(p_value, config.adjustment)

    names = units.candidates
    candidates = [{"name": names[i], "score": float(point[i]), "ci_low": float(low_c[i]), "ci_high": float(high_c[i])}
                  for i in range(prep.m)]
    pairs = [{"a": names[a], "b": names[b], "delta": float(delta[k]), "ci_low": float(low_p[k]),
              "ci_high": float(high_p[k]), "test": tests[k], "p_value": float(p_value[k]),
              "p_adjusted": float(p_adjusted[k]), "min_p_value": float(min_p[k]),
              "verdict": verdict(float(delta[k]), float(p_adjusted[k]), config.alpha)}
             for k, (a, b) in enumerate(zip(ia, ib))]
    return PairedComparison(
        config=config, unit=units.unit, statistic=units.statistic, reducer=units.reducer, n_units=n,
        n_strata=prep.n_strata, candidates=candidates, pairs=pairs, min_p_value=float(min_p.min()),
        leader=names[int(np.argmax(point))], notes=_notes(units, config, tests, min_p, bca_notes))
