"""The shard kernel's compare-and-count in one pass over the score block (numba; ``kernel`` keeps the NumPy passes
as the reference, and both give the same partial).

``count_block`` reads each row of the block product S once, while it is in cache: a fresh row (no nearest-negative
bound from earlier shards) first takes its maximum, then every item at or above the row's lowest threshold is
compacted into a list and settled against the row's positives (sorted by rank score, their bands ``[lo, hi]``
ascending): it outranks the positives whose ``hi`` it exceeds, it is a band item of those whose band holds it, and
it is a nearest-negative candidate when it reaches the row's near bound. The comparisons are those of the NumPy
passes, in the block's precision, so the counts, band items and candidates are the same.

numba is imported on the first call only (``use_fused`` decides whether to call it at all: large
work only, so small scoring jobs never pay its import); compiled functions are cached on disk (``cache=True``):
the first call of a new installation compiles (seconds), later processes load the machine code.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from vertebrae.core.errors import ConfigError

_KERNEL: Any = None
_LOCK = threading.Lock()


KERNELS = ("auto", "numpy", "fused")
_FUSED_MIN_PAIRS = 1 << 28  # below this many (query, gallery) pairs numba's import (~0.5-1.5 s) costs more than it saves


def use_fused(kernel: str, pairs: int) -> bool:
    """Whether to count with the fused numba kernel: ``kernel`` "fused" (numba must be installed), "numpy" (the
    NumPy passes, the reference), or "auto" (fused when numba is installed and ``pairs`` >= ``_FUSED_MIN_PAIRS``).
    Both give the same partials."""
    if kernel not in KERNELS:
        raise ConfigError(f"retrieval kernel must be one of {KERNELS}, got {kernel!r}")
    if kernel == "numpy" or (kernel == "auto" and pairs < _FUSED_MIN_PAIRS):
        return False
    import importlib.util

    if importlib.util.find_spec("numba") is None:
        if kernel == "fused":
            raise ConfigError("retrieval kernel='fused' needs numba, which is not installed (a vertebrae "
                              "dependency: reinstall vertebrae, or use kernel='numpy')")
        return False
    return True


def _compiled() -> Any:
    """The numba kernel, compiled (or loaded from numba's cache) on first use (once, whichever thread asks).
    fastmath nnan/nsz only: score blocks hold no NaN (NaN inputs are refused) and a zero's sign changes no
    comparison; no reassociation or contraction, so every threshold is computed exactly as NumPy computes it."""
    global _KERNEL
    with _LOCK:
        if _KERNEL is None:
            import numba

            _KERNEL = numba.njit(nogil=True, cache=True, fastmath={"nnan", "nsz"})(_count_rows)
    return _KERNEL


def count_block(S: np.ndarray, near: np.ndarray, fresh: np.ndarray, tol: np.ndarray, lo: np.ndarray,
                hi: np.ndarray, indptr: np.ndarray, share: np.ndarray, workspace: Any
                ) -> tuple[np.ndarray, tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
    """Counts, band items and nearest-negative candidates of one score block ``S`` (b x s, C-contiguous).

    ``near``: per row the candidates' bound in S's dtype (ignored for ``fresh`` rows: their bound is
    ``round_down(row max - 2 tol)``, +inf for a row of -inf); ``tol``: per row the kernel's tolerance; ``lo`` /
    ``hi``: the positives' bands in S's dtype, in kernel order (rows ``indptr``; ascending within a row);
    ``share``: per positive the estimated share of a row's items reaching its ``lo`` (from earlier shards; read
    for rows that are not fresh), which only chooses how it is counted. Returns (per positive the items above its
    ``hi``, (row, column, positive) of the band items, (row, column, score as float64) of the candidates); columns
    are block-local. ``workspace`` lends the output buffers.
    """
    kernel = _compiled()
    P = int(indptr[-1])
    capacity = max(4096, 4 * S.shape[0])
    while True:
        band = workspace.get("fused_band", (3, capacity), np.int64)
        cand = workspace.get("fused_near", (2, capacity), np.int64)
        score = workspace.get("fused_score", (capacity,), np.float64)
        counts = np.zeros(P, dtype=np.int64)
        n_band, n_near = kernel(S, near, fresh, np.asarray(tol, dtype=np.float64), lo, hi,
                                np.asarray(indptr, dtype=np.int64), np.asarray(share, dtype=np.float64),
                                _DENSE_SHARE, counts, band, cand, score)
        if max(n_band, n_near) <= capacity:
            break
        capacity = max(n_band, n_near)  # rare (many near-ties): count again with room for all of them
    return (counts, tuple(band[k, :n_band].copy() for k in range(3)),
            (cand[0, :n_near].copy(), cand[1, :n_near].copy(), score[:n_near].copy()))


# A positive reached by more than this share of a row's items is counted by a pass of the row (two vectorised
# comparisons an item, ~0.08 ns), one reached by fewer with the row's candidates (each ~5 ns, and a chunk of 32 items
# holding one is looked at item by item). Measured here.
_DENSE_SHARE = 1.0 / 128
_SAMPLE_RUNS, _SAMPLE_RUN = 8, 32  # a fresh row's sample: 8 evenly spread runs of 32 items


def _count_rows(S, near, fresh, tol, lo, hi, indptr, share, dense_share, counts, band, cand,
                score):  # pragma: no cover - compiled by numba
    """numba body of ``count_block``: fills ``counts`` (zeroed), ``band`` and ``cand``/``score`` up to their
    capacity; returns how many band items and candidates there are (more than the capacity: count again).

    Per row, its positives from the lowest up, while each is reached by more than ``dense_share`` of the items
    (estimated by ``share``, or for a fresh row by a sample of its items; then by the reach of the positive
    below), are *dense*: one pass each counts the items above ``hi`` and at least ``lo`` (when the counts differ,
    one more finds the band items). Then one pass over chunks of 32 items (compared vectorised before any is looked
    at) finds the items at or above the lowest of the near bound and the remaining positives' ``lo``: each is a
    candidate and/or located among those positives. A fresh row's near bound starts from its sample's maximum and
    rises with the candidates it finds (``round_down(candidate - 2 tol)``): a superset of the candidates of the
    row maximum's bound, which later steps cut to the same set (``kernel._BlockState``).
    """
    b, s = S.shape
    capacity = score.shape[0]
    inf = S.dtype.type(np.inf)
    lowest = np.nextafter(-inf, S.dtype.type(0))  # the most negative finite value: excludes only -inf
    n_band, n_near = 0, 0
    max_r = 0
    for i in range(b):
        max_r = max(max_r, indptr[i + 1] - indptr[i])
    above = np.zeros(max_r + 1, dtype=np.int64)  # per remaining positive of a row: a difference array
    runs, run = _SAMPLE_RUNS, _SAMPLE_RUN
    for i in range(b):
        row = S[i]
        start, end = indptr[i], indptr[i + 1]
        bound = near[i]
        reach = share[start] * s if start < end else 0.0
        if fresh[i]:  # a sample: its maximum starts the near bound, its reach of the lowest positive the split
            low = lo[start] if start < end else inf
            top, n_low, m = -inf, 0, 0
            for r in range(runs if s > runs * run else 1):
                a = (r * (s - run)) // (runs - 1) if s > runs * run else 0
                e = a + run if s > runs * run else s
                for j in range(a, e):
                    v = row[j]
                    top = v if v > top else top
                    n_low += v >= low
                m += e - a
            reach = n_low * (s / max(m, 1))
            bound = lowest
            if top > -inf:
                x = np.float64(top) - 2.0 * tol[i]
                bound = S.dtype.type(x)
                if np.float64(bound) > x:
                    bound = np.nextafter(bound, -inf)
        p = start
        while p < end and reach > dense_share * s:  # dense positives: a pass each
            h, low = hi[p], lo[p]
            n_hi, n_lo = 0, 0
            for a in range(0, s, 1 << 20):  # int32 partial counts: twice the lanes of int64 ones
                c = row[a:min(a + (1 << 20), s)]
                x, y = np.int32(0), np.int32(0)
                for j in range(c.size):
                    x = np.int32(x + np.int32(c[j] > h))
                    y = np.int32(y + np.int32(c[j] >= low))
                n_hi += x
                n_lo += y
            counts[p] = n_hi
            if n_lo > n_hi:  # band items
                for a in range(0, s, 32):
                    c = row[a:min(a + 32, s)]
                    hit = np.int32(0)
                    for j in range(c.size):
                        hit = np.int32(hit + np.int32((c[j] >= low) & (c[j] <= h)))
                    if hit == 0:
                        continue
                    for j in range(c.size):
                        if c[j] >= low and c[j] <= h:
                            if n_band < capacity:
                                band[0, n_band] = i
                                band[1, n_band] = a + j
                                band[2, n_band] = p
                            n_band += 1
            reach = np.float64(n_lo)  # at least what reaches the next positive
            p += 1
        first = lo[p] if p < end else inf
        threshold = min(bound, first)
        if threshold == inf:
            continue
        above[:end - p + 1] = 0
        for a in range(0, s, 32):
            c = row[a:min(a + 32, s)]
            hit = np.int32(0)
            for j in range(c.size):
                hit = np.int32(hit + np.int32(c[j] >= threshold))
            if hit == 0:
                continue
            for jj in range(c.size):
                v = c[jj]
                if v < threshold:
                    continue
                j = a + jj
                if v >= bound:
                    if n_near < capacity:
                        cand[0, n_near] = i
                        cand[1, n_near] = j
                        score[n_near] = np.float64(v)
                    n_near += 1
                    if fresh[i]:
                        x = np.float64(v) - 2.0 * tol[i]
                        raised = S.dtype.type(x)
                        if np.float64(raised) > x:
                            raised = np.nextafter(raised, -inf)
                        if raised > bound:
                            bound = raised
                            threshold = min(bound, first)
                if v >= first:
                    k = p
                    if end - p > 16:  # many positives: the first whose hi is not below v, by bisection
                        top_k = end
                        while k < top_k:
                            mid = (k + top_k) // 2
                            if hi[mid] < v:
                                k = mid + 1
                            else:
                                top_k = mid
                    else:
                        while k < end and hi[k] < v:
                            k += 1
                    above[k - p] += 1
                    while k < end and lo[k] <= v:
                        if n_band < capacity:
                            band[0, n_band] = i
                            band[1, n_band] = j
                            band[2, n_band] = k
                        n_band += 1
                        k += 1
        total = 0
        for k in range(end - 1, p - 1, -1):  # positive k: the items located above it
            total += above[k - p + 1]
            counts[k] = total
    return n_band, n_near
