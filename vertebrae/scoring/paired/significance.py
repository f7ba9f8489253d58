"""Paired tests and the multiplicity adjustment across pairs.

- McNemar's exact test on discordant counts ``b = #(a=1, b=0)``, ``c = #(a=0, b=1)``:
  ``p = min(1, 2 Binom(b + c, 1/2).cdf(min(b, c)))``, 1 when ``b + c == 0``.
- The paired randomization test, two-sided, as ``scipy.stats.permutation_test`` scores it: with
  ``gamma = 100 eps |observed|``, ``less = #{null <= observed + gamma}``, ``greater = #{null >= observed -
  gamma}``; random swaps add 1 to both counts and to the resample count B (exact enumeration adds nothing);
  ``p = min(1, 2 min(less, greater) / B)``.
- Holm's step-down adjustment, Bonferroni, or none.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vertebrae.core.errors import ValidationError

TOLERANCE = 100 * np.finfo(np.float64).eps


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value of ``b`` and ``c`` discordant units."""
    if b + c == 0:
        return 1.0
    from scipy.stats import binom  # here, not at import: scipy.stats costs ~1 s, and the workflow's planning
    # (which imports this package for ComparisonConfig) never tests anything

    return float(min(1.0, 2.0 * binom.cdf(min(b, c), b + c, 0.5)))


def mcnemar_min_p(discordant: int) -> float:
    """The smallest p-value McNemar's exact test can give with ``discordant`` = b + c units."""
    return float(min(1.0, 2.0 * 0.5 ** discordant))


def tail_counts(null: np.ndarray, observed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(less, greater)`` counts of a ``(rows, k)`` block of null statistics against ``observed`` ``(k,)``,
    with scipy's relative tolerance."""
    gamma = np.abs(TOLERANCE * observed)
    less = np.count_nonzero(null <= observed + gamma, axis=0)
    greater = np.count_nonzero(null >= observed - gamma, axis=0)
    return less, greater


def randomization_p(less: np.ndarray, greater: np.ndarray, resamples: int, exact: bool) -> np.ndarray:
    """Two-sided p-values from tail counts over ``resamples`` null rows (random: +1 adjustment)."""
    adjustment = 0 if exact else 1
    p_less = (np.asarray(less) + adjustment) / (resamples + adjustment)
    p_greater = (np.asarray(greater) + adjustment) / (resamples + adjustment)
    return np.clip(2 * np.minimum(p_less, p_greater), 0.0, 1.0)


def holm(p: Any) -> np.ndarray:
    """Holm's step-down adjusted p-values, in input order.

    With the m p-values sorted ascending ``p_(1) <= ... <= p_(m)`` (stable), ``adj_(i) = min(1, max_{j <= i}
    (m - j + 1) p_(j))``.
    """
    p = _p_values(p)
    m = p.size
    order = np.argsort(p, kind="stable")
    scaled = p[order] * (m - np.arange(m))
    adjusted = np.empty(m)
    adjusted[order] = np.minimum(1.0, np.maximum.accumulate(scaled)) if m else scaled
    return adjusted


def bonferroni(p: Any) -> np.ndarray:
    """``min(1, m p)``."""
    p = _p_values(p)
    return np.minimum(1.0, p * p.size)


def adjust(p: Any, method: str) -> np.ndarray:
    """Adjusted p-values by ``method``: ``"holm"``, ``"bonferroni"`` or ``"none"``."""
    if method == "holm":
        return holm(p)
    if method == "bonferroni":
        return bonferroni(p)
    if method == "none":
        return _p_values(p).copy()
    raise ValidationError(f"unknown adjustment {method!r}; expected 'holm', 'bonferroni' or 'none'")


def verdict(delta: float, p_adjusted: float, alpha: float) -> str:
    """``"ahead"`` (a better than b: adjusted p < alpha and delta > 0), ``"behind"`` (adjusted p < alpha and
    delta < 0), else ``"indistinguishable"``."""
    if p_adjusted < alpha and delta > 0:
        return "ahead"
    if p_adjusted < alpha and delta < 0:
        return "behind"
    return "indistinguishable"


def _p_values(p: Any) -> np.ndarray:
    p = np.asarray(p, dtype=np.float64)
    if p.ndim != 1 or not np.all((p >= 0) & (p <= 1)):
        raise ValidationError(f"p-values must be a 1-D sequence of numbers in [0, 1], got {p!r}")
    return p
