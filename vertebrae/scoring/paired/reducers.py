"""Reducers: a statistic from per-stratum feature totals.

Every statistic a comparison handles is a function of the candidates' per-stratum feature *totals* (sums of
the per-unit feature vectors over the units of a stratum, with multiplicity in a bootstrap resample), so the
totals of every resample of every candidate come from one matrix product. Shapes: ``totals`` is
``(..., S, k, F)`` (S strata, k candidates or pairs, F features), ``sizes`` the unit count of each stratum in
the (re)sample, broadcastable to ``(..., S, 1)``. :func:`statistic` returns ``(..., k)``: the mean over strata
(equal weights) of each stratum's value:

- ``"mean"`` (F = 1): ``total / size``.
- ``"ratio"`` (F = 2): ``total[0] / total[1]`` (a weighted mean when the features are ``(w*x, w)``); 0 where
  the denominator total is 0 (possible only in a resample; the point value refuses it, see ``units``).
- ``"macro_f1"`` (F = 3K, one stratum): features ``[tp (K), predicted (K), support (K)]`` one-hot per sample;
  precision = tp/predicted (0 where predicted == 0), recall = tp/support (0 where support == 0), f1 =
  2PR/(P+R) (0 where P+R == 0), value = mean of f1 over all K classes — the arithmetic of
  ``vertebrae.scoring.zero_shot``'s classification metrics, operation for operation, so the point value equals
  the reported macro-F1 bit for bit.
"""

from __future__ import annotations

import numpy as np

REDUCERS = ("mean", "ratio", "macro_f1")


def _divide(num: np.ndarray, den: np.ndarray, where: np.ndarray) -> np.ndarray:
    return np.divide(num, den, out=np.zeros(np.broadcast_shapes(num.shape, den.shape)), where=where)


def stratum_values(reducer: str, totals: np.ndarray, sizes: np.ndarray | float) -> np.ndarray:
    """``(..., S, k)``: each stratum's value from its totals ``(..., S, k, F)``."""
    if reducer == "mean":
        return totals[..., 0] / sizes
    if reducer == "ratio":
        num, den = totals[..., 0], totals[..., 1]
        return _divide(num, den, den != 0)
    if reducer == "macro_f1":
        k = totals.shape[-1] // 3
        tp, predicted_n, support = totals[..., :k], totals[..., k:2 * k], totals[..., 2 * k:]
        precision = _divide(tp, predicted_n, predicted_n > 0)
        recall = _divide(tp, support, support > 0)
        denom = precision + recall
        f1 = _divide(2 * precision * recall, denom, denom > 0)
        return f1.mean(axis=-1)
    raise ValueError(f"unknown reducer {reducer!r}")


def statistic(reducer: str, totals: np.ndarray, sizes: np.ndarray | float) -> np.ndarray:
    """``(..., k)``: the mean over strata (axis -2 of the stratum values) of :func:`stratum_values`."""
    return stratum_values(reducer, totals, sizes).mean(axis=-2)
