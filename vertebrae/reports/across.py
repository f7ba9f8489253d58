"""Across benchmarks: each candidate's mean rank, its wins, ties and losses against each other candidate, and a
bootstrap interval of the mean rank over benchmarks.

- mean rank: over the benchmarks that rank the candidate (``benchmarks`` says how many);
- wins / ties / losses of A against B: over the benchmarks where both are ranked and the paired comparison holds
  the pair: ``ahead`` is a win, ``indistinguishable`` a tie, ``behind`` a loss (never from the scores alone);
- the interval: the benchmarks compared are those that rank at least one candidate; only candidates ranked in
  every one of them get one (the others are listed as left out, since a mean over different benchmarks is not
  comparable); the benchmarks are resampled with replacement (``resamples`` times, seeded) and the interval is the
  percentile interval of the resampled mean ranks. Fewer than two benchmarks: no interval.
- a labelled benchmark's target views (``BENCH@VIEW`` reports: the same rows, another question) are left out: each
  benchmark counts once, by its primary view; the views stay in the leaderboard's tables.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from vertebrae.reports.leaderboard import Row, benchmarks_of, candidates_of, is_view


@dataclass(frozen=True)
class Standing:
    """A candidate across benchmarks."""

    candidate: str
    benchmarks: int
    mean_rank: float | None
    ci_low: float | None
    ci_high: float | None


@dataclass(frozen=True)
class Across:
    standings: tuple[Standing, ...]
    records: Mapping[tuple[str, str], tuple[int, int, int]]  # (a, b) -> (wins, ties, losses) of a against b
    compared: tuple[str, ...]
    left_out: tuple[str, ...]
    level: float
    resamples: int

    def to_dict(self) -> dict[str, Any]:
        return {"standings": [s.__dict__ for s in self.standings],
                "head_to_head": [{"a": a, "b": b, "wins": w, "ties": t, "losses": lo}
                                 for (a, b), (w, t, lo) in self.records.items()],
                "benchmarks_compared": list(self.compared), "left_out": list(self.left_out), "level": self.level,
                "resamples": self.resamples}


def head_to_head(pairs: Mapping[str, Mapping[tuple[str, str], str]], names: Sequence[str]
                 ) -> dict[tuple[str, str], tuple[int, int, int]]:
    """(a, b) -> (wins, ties, losses) from each benchmark's paired verdicts ``{(a, b): verdict of a against b}``."""
    out = {}
    for a in names:
        for b in names:
            if a == b:
                continue
            verdicts = [v[(a, b)] for v in pairs.values() if (a, b) in v]
            if verdicts:
                out[(a, b)] = (verdicts.count("ahead"), verdicts.count("indistinguishable"), verdicts.count("behind"))
    return out


def across(rows: Sequence[Row], pairs: Mapping[str, Mapping[tuple[str, str], str]], *, level: float = 0.95,
           resamples: int = 2000, seed: int = 0) -> Across:
    """The cross-benchmark standings of the long table's ``rows``; ``pairs``: per benchmark key, the paired verdict
    of every ordered pair of its candidates (``vertebrae.stages.leaderboard_job.paired_verdicts``)."""
    views = {r.benchmark for r in rows if is_view(r)}  # a benchmark counts once: by its primary view
    rows = [r for r in rows if r.benchmark not in views]
    pairs = {key: value for key, value in pairs.items() if key not in views}
    names = candidates_of(rows)
    ranked = [r for r in rows if r.rank is not None]
    compared = [b for b in benchmarks_of(rows) if any(r.benchmark == b for r in ranked)]
    ranks = {(r.candidate, r.benchmark): r.rank for r in ranked}
    complete = [n for n in names if all((n, b) in ranks for b in compared)]
    matrix = np.array([[ranks[(n, b)] for b in compared] for n in complete], dtype=float).reshape(len(complete),
                                                                                                  len(compared))
    intervals: dict[str, tuple[float, float]] = {}
    if len(compared) >= 2 and complete:
        rng = np.random.default_rng(seed)
        picks = rng.integers(0, len(compared), size=(resamples, len(compared)))
        means = matrix[:, picks].mean(axis=2)  # candidates x resamples
        tail = (1 - level) / 2
        lows, highs = np.quantile(means, tail, axis=1), np.quantile(means, 1 - tail, axis=1)
        intervals = {n: (float(lo), float(hi)) for n, lo, hi in zip(complete, lows, highs)}
    standings = []
    for n in names:
        own = [ranks[(n, b)] for b in compared if (n, b) in ranks]
        low, high = intervals.get(n, (None, None))
        standings.append(Standing(n, len(own), float(np.mean(own)) if own else None, low, high))
    standings.sort(key=lambda s: (s.mean_rank is None, -s.benchmarks, s.mean_rank or 0.0))
    return Across(tuple(standings), head_to_head(pairs, names), tuple(compared),
                  tuple(n for n in names if n not in complete), level, resamples)


__all__ = ["Across", "Standing", "across", "head_to_head"]
