"""The jackknife acceleration of BCa intervals: leave one unit out, within its stratum.

With unit i of stratum s left out, the statistic is ``t_si = (sum_r v_r - v_s + v_s^(-i)) / S`` (v: stratum
values; ``v_s^(-i)`` from the totals ``T_s - x_i`` over ``n_s - 1`` units). Per stratum
``U_si = (n_s - 1)(mean_i t_si - t_si)``; :func:`accelerations` returns ``a`` (``resampling.acceleration``) for
every candidate and for every pair (``t`` of a pair = ``t_a - t_b``). Needs ``n_s >= 2`` in every stratum.
"""

from __future__ import annotations

import numpy as np

from vertebrae.scoring.paired.reducers import stratum_values
from vertebrae.scoring.paired.resampling import acceleration


def accelerations(reducer: str, x: np.ndarray, totals: np.ndarray, bounds: np.ndarray, ia: np.ndarray,
                  ib: np.ndarray, *, block_elements: int = 4_000_000) -> tuple[np.ndarray, np.ndarray]:
    """``(a_candidates (m,), a_pairs (P,))`` from stratum-ordered features ``x`` ``(n, m, F)`` and the point
    ``totals`` ``(S, m, F)``."""
    n_strata, m, _ = totals.shape
    sizes = np.diff(bounds).astype(np.float64)
    values = stratum_values(reducer, totals, sizes[:, None])  # (S, m)
    theta = np.empty((x.shape[0], m))
    rows = max(1, block_elements // max(1, x.shape[1] * x.shape[2]))
    for s in range(n_strata):
        lo, hi = int(bounds[s]), int(bounds[s + 1])
        others = values.sum(axis=0) - values[s]
        for start in range(lo, hi, rows):
            stop = min(hi, start + rows)
            left_out = stratum_values(reducer, totals[s][None, None] - x[start:stop, None], sizes[s] - 1)[:, 0]
            theta[start:stop] = (others + left_out) / n_strata
    u2_c, u3_c = np.zeros(m), np.zeros(m)
    u2_p, u3_p = np.zeros(ia.size), np.zeros(ia.size)
    step = max(1, block_elements // max(1, ia.size + m))
    for s in range(n_strata):
        lo, hi = int(bounds[s]), int(bounds[s + 1])
        n_s = hi - lo
        mean_c = theta[lo:hi].mean(axis=0)
        mean_p = mean_c[ia] - mean_c[ib]
        for start in range(lo, hi, step):
            block = theta[start:min(hi, start + step)]
            u_c = (n_s - 1) * (mean_c - block)
            u_p = (n_s - 1) * (mean_p - (block[:, ia] - block[:, ib]))
            u2_c += (u_c ** 2).sum(axis=0) / n_s ** 2
            u3_c += (u_c ** 3).sum(axis=0) / n_s ** 3
            u2_p += (u_p ** 2).sum(axis=0) / n_s ** 2
            u3_p += (u_p ** 3).sum(axis=0) / n_s ** 3
    return acceleration(u2_c, u3_c), acceleration(u2_p, u3_p)
