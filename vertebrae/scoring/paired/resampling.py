"""Resampling: stratified bootstrap counts, swap bits, and the bootstrap intervals.

Determinism: resamples come in fixed chunks of ``CHUNK`` rows; chunk ``c`` of stream ``tag`` draws from
``numpy.random.default_rng(SeedSequence([seed, tag, c]))``. A block is a whole number of chunks, so the block
size (a memory knob) never changes a result, and the chunks of a block can be drawn in parallel.

Bootstrap row = a multinomial count vector: each stratum ``s`` (units ``bounds[s]:bounds[s+1]`` of the
stratum-contiguous order) draws ``n_s`` units with replacement among its own. Swap row = ``n`` independent
fair bits (1 = swap the two candidates' values on that unit), or in the exact regime the bits of the integer
row index (all ``2**n`` patterns).

Intervals follow ``scipy.stats.bootstrap``: the quantile rule is ``scipy.stats.quantile(method="linear")``
(:func:`quantile`); "percentile" = quantiles ``(1-level)/2`` and ``(1+level)/2`` of the bootstrap
distribution; "bca" = quantiles ``Phi(z0 + (z0 + z)/(1 - a (z0 + z)))`` for ``z = Phi^-1((1-level)/2)`` and
its negative, with ``z0 = Phi^-1((#{t* < t} + #{t* <= t}) / 2B)`` and the jackknife acceleration
``a = sum_s sum_i U_si^3 / n_s^3 / (6 (sum_s sum_i U_si^2 / n_s^2)^(3/2))``, ``U_si = (n_s - 1)(mean_i t_si -
t_si)``, ``t_si`` the statistic with unit i of stratum s left out (each stratum is one of scipy's samples).
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np

CHUNK = 16
BOOTSTRAP_TAG = 1
SWAP_TAG = 2
BLOCK_BYTES = 64_000_000
# per-row bincount beats one flat bincount with row offsets on wide strata (cache)
_ROWWISE_MIN = 4096
_FLAT = 100 * np.finfo(np.float64).eps


def _chunk_rng(seed: int, tag: int, chunk: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([seed, tag, chunk]))


def block_rows(n_units: int, block_bytes: int = BLOCK_BYTES) -> int:
    """Rows per block: a multiple of ``CHUNK`` whose float64 ``rows x n_units`` matrix fits ``block_bytes``."""
    chunks = max(1, block_bytes // (8 * CHUNK * max(1, n_units)))
    return CHUNK * chunks


def _bootstrap_chunk(out: np.ndarray, bounds: np.ndarray, seed: int, chunk: int) -> None:
    rng = _chunk_rng(seed, BOOTSTRAP_TAG, chunk)
    rows = out.shape[0]
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        size = int(hi - lo)
        draws = rng.integers(0, size, (rows, size))
        if size >= _ROWWISE_MIN:
            for r in range(rows):
                out[r, lo:hi] = np.bincount(draws[r], minlength=size)
        else:
            draws += (np.arange(rows) * size)[:, None]
            out[:, lo:hi] = np.bincount(draws.ravel(), minlength=rows * size).reshape(rows, size)


def _swap_chunk(out: np.ndarray, seed: int, chunk: int) -> None:
    rows, n = out.shape
    width = (n + 7) // 8
    raw = np.frombuffer(_chunk_rng(seed, SWAP_TAG, chunk).bytes(rows * width), dtype=np.uint8)
    out[...] = np.unpackbits(raw.reshape(rows, width), axis=1, count=n)


def _exact_swap_chunk(out: np.ndarray, start: int) -> None:
    rows, n = out.shape
    index = np.arange(start, start + rows, dtype=np.int64)[:, None]
    out[...] = (index >> np.arange(n, dtype=np.int64)) & 1


def blocks(kind: str, total: int, n_units: int, bounds: np.ndarray, seed: int, *, rows_per_block: int,
           workers: int = 1) -> Iterator[tuple[int, np.ndarray]]:
    """Yield ``(start, matrix)``: consecutive float64 ``(rows, n_units)`` blocks of ``total`` rows of kind
    ``"bootstrap"`` (counts), ``"swap"`` (random bits) or ``"exact"`` (all bit patterns, ``total = 2**n``).
    The yielded buffer is reused: consume it before the next step."""
    if rows_per_block % CHUNK:
        raise ValueError(f"rows_per_block must be a multiple of {CHUNK}, got {rows_per_block}")
    buffer = np.empty((rows_per_block, n_units))
    pool = ThreadPoolExecutor(max_workers=workers) if workers > 1 else None

    def fill(chunk: int, start: int) -> None:
        rows = min(CHUNK, total - chunk * CHUNK)
        view = buffer[start:start + rows]
        if kind == "bootstrap":
            _bootstrap_chunk(view, bounds, seed, chunk)
        elif kind == "swap":
            _swap_chunk(view, seed, chunk)
        else:
            _exact_swap_chunk(view, chunk * CHUNK)

    try:
        for start in range(0, total, rows_per_block):
            rows = min(rows_per_block, total - start)
            chunks = range(start // CHUNK, (start + rows + CHUNK - 1) // CHUNK)
            offsets = [(c, c * CHUNK - start) for c in chunks]
            if pool is None:
                for c, off in offsets:
                    fill(c, off)
            else:
                list(pool.map(lambda item: fill(*item), offsets))
            yield start, buffer[:rows]
    finally:
        if pool is not None:
            pool.shutdown()


def quantile(sorted_values: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Column-wise ``scipy.stats.quantile(x, p, method="linear")`` of ``(B, k)`` values sorted along axis 0,
    probabilities ``p`` ``(k,)`` (one per column), in scipy's arithmetic: ``j + 1 = floor(p B + 1 - p)``,
    ``g = (p B + 1 - p) mod 1``, result ``(1 - g) x[j] + g x[j + 1]`` (indices clipped to the sample)."""
    b = sorted_values.shape[0]
    p = np.asarray(p, dtype=np.float64)
    jg = p * b + (1 - p)
    jp1 = jg // 1
    j = jp1 - 1
    g = jg % 1
    g = np.where(j < 0, 0.0, g)
    j = np.clip(j, 0, b - 1).astype(np.int64)
    jp1 = np.clip(jp1, 0, b - 1).astype(np.int64)
    cols = np.arange(sorted_values.shape[1])
    return (1 - g) * sorted_values[j, cols] + g * sorted_values[jp1, cols]


def bca_probabilities(distribution: np.ndarray, point: np.ndarray, acceleration: np.ndarray,
                      level: float) -> tuple[np.ndarray, np.ndarray]:
    """The BCa quantile probabilities ``(alpha_1, alpha_2)`` per column (scipy's ``_bca_interval``)."""
    from scipy.special import ndtr, ndtri  # here, not at import: ~0.1 s that the workflow's planning (which
    # imports this package for ComparisonConfig) and each Snakemake parse would pay for nothing

    b = distribution.shape[0]
    below = np.count_nonzero(distribution < point, axis=0) + np.count_nonzero(distribution <= point, axis=0)
    z0 = ndtri(below / (2 * b))
    z_alpha = float(ndtri((1 - level) / 2))
    with np.errstate(invalid="ignore", divide="ignore"):
        num1 = z0 + z_alpha
        alpha_1 = ndtr(z0 + num1 / (1 - acceleration * num1))
        num2 = z0 - z_alpha
        alpha_2 = ndtr(z0 + num2 / (1 - acceleration * num2))
    return alpha_1, alpha_2


def acceleration(u2: np.ndarray, u3: np.ndarray) -> np.ndarray:
    """``a = sum U^3/n^3 / (6 (sum U^2/n^2)^(3/2))`` from the per-stratum-normalised sums (0 where the
    jackknife values do not vary)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        a = u3 / (6.0 * u2 ** 1.5)
    return np.where(u2 > 0, a, 0.0)


def intervals(distribution: np.ndarray, point: np.ndarray, level: float, method: str,
              accel: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(low, high, fell_back)`` per column of a ``(B, k)`` bootstrap distribution.

    A column whose resampled values are all equal (up to a relative ``100 eps``: the same totals summed in
    another order) gets ``[point, point]``. For "bca", a column whose BCa
    probabilities are not finite (the point lies outside the distribution) gets the percentile interval and
    ``fell_back`` True.
    """
    k = distribution.shape[1]
    ordered = np.sort(distribution, axis=0)
    alpha = (1 - level) / 2
    p_low, p_high = np.full(k, alpha), np.full(k, 1 - alpha)
    fell_back = np.zeros(k, dtype=bool)
    if method == "bca":
        a1, a2 = bca_probabilities(distribution, point, accel, level)
        fell_back = ~(np.isfinite(a1) & np.isfinite(a2))
        p_low, p_high = np.where(fell_back, p_low, a1), np.where(fell_back, p_high, a2)
    low, high = quantile(ordered, p_low), quantile(ordered, p_high)
    scale = np.maximum(np.abs(ordered[0]), np.abs(ordered[-1]))
    flat = ordered[-1] - ordered[0] <= _FLAT * scale
    low, high = np.where(flat, point, low), np.where(flat, point, high)
    return low, high, fell_back & ~flat
