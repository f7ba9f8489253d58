"""The shard kernel: exact partial counts of one (query block, gallery shard) unit (``score_shard``).

Block products (float32 scan rows unless a row norm exceeds 1e18) only *filter*: every block score is within
``tol`` of its direct value (``arithmetic._tolerance``), so a competitor more than ``tol`` above (below) a
positive's score outranks (does not outrank) it, and one inside that band is recomputed directly and compared
exactly. Likewise the nearest negative is chosen, by direct scores, among the items whose upper bound (block
score + tol) reaches the best lower bound (block score - tol) of any eligible negative. Ranks, ties, nearest
negatives and metrics therefore do not depend on block sizes, shard boundaries, worker threads, the BLAS or the
scan precision. A unit holds its score block, two boolean masks and at most half the block again, about 8 bytes
an element (a float64 block is scored in two column halves).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from vertebrae.core.errors import ValidationError
from vertebrae.scoring.retrieval.arithmetic import _U, _product, _tolerance
from vertebrae.scoring.retrieval.config import RetrievalConfig
from vertebrae.scoring.retrieval.conventions import IdTies, tie_order
from vertebrae.scoring.retrieval.device import block_product, resolve_device
from vertebrae.scoring.retrieval.fused import use_fused
from vertebrae.scoring.retrieval.inputs import Endpoint
from vertebrae.scoring.retrieval.partial import RetrievalPartial
from vertebrae.scoring.retrieval.positives import PositivePairs, _check_endpoints, _pair_similarities, pair_rank_scores

# cost model of the shard kernel, measured (relative units): the passes of one dense positive, per row
# element, versus extracting and locating one candidate of a sparse positive
_DENSE_PASS_COST = 1.0
_SPARSE_CANDIDATE_COST = 150.0
_GROUP_BYTES = 2 << 20  # bytes of scores per row group of the shard kernel's passes


def _block_entries(matrix: Any, b: int, s: int, query_offset: int, gallery_offset: int, what: str
                   ) -> tuple[np.ndarray, np.ndarray]:
    """(row, column) of the block's nonzero entries in block coordinates; a matrix of the block's shape is
    block-local, otherwise its rows/columns are global and are sliced at the offsets."""
    if matrix is None:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    matrix = matrix if sp.isspmatrix_csr(matrix) or isinstance(matrix, sp.csr_array) else sp.csr_matrix(matrix)
    if matrix.shape[0] != b:
        if matrix.shape[0] < query_offset + b:
            raise ValidationError(f"{what} has {matrix.shape[0]} rows; the block needs rows "
                                  f"[{query_offset}, {query_offset + b})")
        matrix = matrix[query_offset:query_offset + b]
    mask = np.asarray(matrix.data != 0)
    rows = np.repeat(np.arange(b, dtype=np.int64), np.diff(matrix.indptr))[mask]
    cols = matrix.indices.astype(np.int64)[mask]
    if matrix.shape[1] != s:
        if matrix.shape[1] < gallery_offset + s:
            raise ValidationError(f"{what} has {matrix.shape[1]} columns; the shard needs columns "
                                  f"[{gallery_offset}, {gallery_offset + s})")
        keep = (cols >= gallery_offset) & (cols < gallery_offset + s)
        rows, cols = rows[keep], cols[keep] - gallery_offset
    return rows, cols


def _count_true_rows(mask: np.ndarray) -> np.ndarray:
    """Count of True along the last axis of a bool array whose last axis is contiguous and a multiple of 8 long.

    Bytes are 0 or 1, so adding up to 255 of a row's 8-byte words never carries from one byte lane into the
    next: the row's count is the sum of the lanes of its chunk sums (SWAR; ~3x a per-word popcount)."""
    words = mask.view(np.uint64)
    if words.shape[-1] == 0:
        return np.zeros(words.shape[:-1], dtype=np.int64)
    lanes = np.add.reduceat(words, np.arange(0, words.shape[-1], 255), axis=-1)
    return lanes.view(np.uint8).sum(axis=-1, dtype=np.int64)


def _round_up(x: np.ndarray, dtype: Any) -> np.ndarray:
    """The smallest ``dtype`` values >= x (x itself for float64)."""
    if dtype == np.float64:
        return x
    y = x.astype(dtype)
    return np.where(y.astype(np.float64) < x, np.nextafter(y, dtype(np.inf)), y)


def _round_down(x: np.ndarray, dtype: Any) -> np.ndarray:
    """The largest ``dtype`` values <= x (x itself for float64)."""
    if dtype == np.float64:
        return x
    y = x.astype(dtype)
    return np.where(y.astype(np.float64) > x, np.nextafter(y, dtype(-np.inf)), y)


def score_shard(Q_block: Endpoint, G_shard: Endpoint, *, query_offset: int, gallery_offset: int,
                positives: PositivePairs, exclusions: Any = None, config: RetrievalConfig,
                device: str = "cpu", kernel: str = "auto", gallery_ids: Any = None) -> RetrievalPartial:
    """Partial counts of one (query block, gallery shard) unit.

    ``Q_block`` = rows [query_offset, query_offset + b) of the prepared queries, ``G_shard`` = rows
    [gallery_offset, gallery_offset + s) of the prepared gallery (``prepare_endpoint(...)[a:b]``).
    ``positives`` covers the block's queries (or all queries; then it is sliced). ``exclusions`` is None, a
    (b x s) block, or a matrix in global coordinates.

    Kernel (``_score_unit``): S = Q.scan @ G.scan.T (squared_l2: (2 Q.scan) @ G.scan.T - |g|^2), one BLAS
    call; excluded pairs and the shard's positives are set to -inf. Every score is within ``tol``
    (``_tolerance``) of its direct value, so against a positive of direct score t an item scoring above
    ``hi = t + tol`` outranks it, one below ``lo = t - tol`` does not, and one in the band [lo, hi] is
    recomputed directly and compared exactly (tie rule: the config's conventions, ``conventions.tie_order``:
    gallery row order by default, or gallery id order, the ids of global gallery rows read from ``gallery_ids``,
    a sequence or a callable, only for the rows that meet in a tie). Each row's positives are split
    by the share of items expected to reach them (``_split_positives``: from a sample of the block, or from
    the block's earlier shards): the top ones, which few items reach, are *sparse*: one pass finds the items
    at or above the lowest sparse ``lo`` (and the nearest-negative candidates, see ``_BlockState``) and each
    is located among the row's sorted bands; every other positive is *dense*: one pass counts the items above
    its ``hi`` (bit counts of the mask) and one finds its band items, pass k taking every row's k-th dense
    positive (the product's rows are put in order of dense count, so a pass reads a prefix of S). All passes
    run over groups of S rows of about ``_GROUP_BYTES``, so a group stays in cache from pass to pass. Thresholds
    are rounded outwards to the scan precision. Direct scores (band items, nearest-negative candidates) are
    computed at the end, in gallery order. Positives compare among themselves by their direct scores. A
    float64 scan block is scored in two column halves (memory). ``device``: where the block product runs
    (``device.resolve_device``: "cpu" = NumPy, "torch:cpu", "cuda", "cuda:N", "auto"); ``kernel``: how the
    block is counted (``fused.use_fused``: "numpy" = these passes, "fused" = one numba pass, "auto"); the partial
    is the same.
    """
    _check_endpoints(Q_block, G_shard, config, "score_shard")
    b = len(Q_block)
    if Q_block.shape[1] != G_shard.shape[1]:
        raise ValidationError(f"score_shard: query block {Q_block.shape} and gallery shard {G_shard.shape} must have "
                              "the same number of columns")
    query_offset, gallery_offset = int(query_offset), int(gallery_offset)
    if positives.n_queries != b:
        if positives.n_queries < query_offset + b:
            raise ValidationError(f"score_shard: positives cover {positives.n_queries} queries; the block needs "
                                  f"[{query_offset}, {query_offset + b})")
        positives = positives.rows(query_offset, query_offset + b)
    product = block_product(resolve_device(device), (Q_block.scan, G_shard.scan))
    workspace = _Workspace(product, use_fused(kernel, b * len(G_shard)))
    return score_query_block(Q_block, G_shard, ((0, G_shard),), query_offset=query_offset,
                             gallery_offset=gallery_offset, positives=positives, exclusions=exclusions, config=config,
                             workspace=workspace, ties=tie_order(config.conventions, gallery_ids))


def score_query_block(Q_block: Endpoint, G: Endpoint, shards: Any, *, query_offset: int, gallery_offset: int,
                      positives: PositivePairs, exclusions: Any, config: RetrievalConfig,
                      workspace: _Workspace, ties: IdTies | None = None) -> RetrievalPartial:
    """Partial counts of one query block (``Q_block``: rows [query_offset, query_offset + b) of the prepared
    queries; ``positives``: exactly its queries') against rows [gallery_offset, gallery_offset + len(G)) of the
    prepared gallery, ``G``, shard after shard: ``shards`` = (start, ``G[start:stop]``) pairs, in order, tiling
    ``G``. One state is carried across the shards, so each shard splits its positives by what the earlier ones
    showed (``_split_positives``), and the deferred direct scores are computed once, at the end. ``exclusions``:
    as for ``score_shard``, its rows the block's (block-local or global), its columns the gallery's;
    ``workspace``: the calling thread's buffers and block product; ``ties``: the order of equal scores
    (``conventions.tie_order``; None: gallery row order). The partial equals the merge of one ``score_shard`` per
    shard (the kernel's counts do not depend on shard boundaries)."""
    state = _BlockState(_BlockPositives.of(positives), Q_block, G, gallery_offset, ties)
    state.count_positives(gallery_offset, gallery_offset + len(G))
    for start, shard in shards:
        state.add_shard(shard, gallery_offset + start, exclusions, query_offset, config, workspace)
    return state.partial(query_offset, ((gallery_offset, gallery_offset + len(G)),))


@dataclass(frozen=True, eq=False)
class _BlockPositives:
    """A query block's positives, derived once and read by every shard of the block.

    ``indptr``, ``rows`` (block row of each positive), ``cols`` (global gallery rows) and ``t`` (direct
    rank scores) in the positives' own order; ``order`` sorts them by (row, rank score ascending), the
    kernel's order, in which ``sorted_cols`` / ``sorted_t`` are given (``rows`` is the same in both).
    """

    indptr: np.ndarray
    rows: np.ndarray
    cols: np.ndarray
    t: np.ndarray
    order: np.ndarray
    sorted_cols: np.ndarray
    sorted_t: np.ndarray

    @classmethod
    def of(cls, positives: PositivePairs) -> _BlockPositives:
        indptr = positives.indptr
        rows = np.repeat(np.arange(positives.n_queries, dtype=np.int64), np.diff(indptr))
        order = np.lexsort((positives.rank_scores, rows))
        return cls(indptr, rows, positives.indices, positives.rank_scores, order, positives.indices[order],
                   positives.rank_scores[order])


class _Workspace:
    """One worker's reusable buffers (the score block and two masks): no fresh pages for every unit; ``product``:
    the block product's device (``device.block_product``; None: NumPy); ``fused``: count with the one-pass numba
    kernel (``fused.count_block``) instead of the NumPy passes (``use_fused``)."""

    def __init__(self, product: Any = None, fused: bool = False) -> None:
        self._buffers: dict[str, np.ndarray] = {}
        self.product = product
        self.fused = bool(fused)

    def get(self, name: str, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        n = math.prod(shape) * np.dtype(dtype).itemsize
        buffer = self._buffers.get(name)
        if buffer is None or buffer.size < n:
            buffer = self._buffers[name] = np.empty(n, dtype=np.uint8)
        return buffer[:n].view(dtype).reshape(shape)


class _BlockState:
    """What one query block accumulates over gallery shards until its partial is exact.

    Counts decided by block scores (in kernel order), the positives' counts among themselves (positives'
    order), and the pairs that need a direct score, deferred so that each is computed once, in gallery order:
    band items (row, gallery row, positive) and nearest-negative candidates (row, gallery row, upper bound
    ``block score + tol``). ``lower`` is per row the best lower bound ``block max - tol`` seen: a candidate
    whose upper bound is below it cannot be the best negative and is dropped. ``G`` / ``g_offset``: the
    gallery rows the deferred pairs index (global row = g_offset + local row). ``ties``: the order of equal
    scores (None: gallery row order, the fast path; an ``IdTies``: gallery id order, looked up for tied pairs only).
    """

    def __init__(self, block: _BlockPositives, Q_block: Endpoint, G: Endpoint, g_offset: int,
                 ties: IdTies | None = None) -> None:
        P, b = block.t.size, len(Q_block)
        self.block, self.Q, self.G, self.g_offset = block, Q_block, G, int(g_offset)
        self.tie_order = ties
        self.counts = np.zeros(P + 1, dtype=np.int64)  # index P: "no positive" (padding)
        self.ties = np.zeros(P, dtype=np.int64)
        self.outranked = np.zeros(P, dtype=np.int64)
        self.tied = np.zeros(P, dtype=np.int64)
        self.band: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.near: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.lower = np.full(b, -np.inf)
        self.seen = 0  # gallery columns counted so far
        self._bands: tuple[Any, ...] = ()

    def bands(self, g_max: float, narrow: bool, dtype: Any, similarity: str) -> tuple[np.ndarray, ...]:
        """(tol, lo, hi, key_lo, key_hi) against a shard whose largest row norm is ``g_max``, its block scores in
        ``dtype`` (``narrow``: either side scans float32 rows): per row the kernel's tolerance; per positive
        (kernel order) its band [lo, hi] rounded outwards to ``dtype``, padded at index P with +inf (never
        reached), and the (row, lo) / (row, hi) keys. Kept while the arguments repeat (a cosine gallery)."""
        if self._bands[:3] != (g_max, narrow, dtype):
            block, Q = self.block, self.Q
            P, rows = block.t.size, block.rows
            tol = _tolerance(similarity, Q.shape[1], np.sqrt(Q.sq), g_max, 2.0 ** -24 if narrow else _U)
            lo = np.append(_round_down(block.sorted_t - tol[rows], dtype), dtype(np.inf))
            hi = np.append(_round_up(block.sorted_t + tol[rows], dtype), dtype(np.inf))
            self._bands = (g_max, narrow, dtype, tol, lo, hi, _row_keys(rows, lo[:P]), _row_keys(rows, hi[:P]))
        return self._bands[3:]

    def count_positives(self, start: int, stop: int) -> None:
        """Count the positives in gallery rows [start, stop) as competitors of their query's positives."""
        block = self.block
        _count_positive_competitors(block.indptr, block.rows, block.cols, block.t,
                                    (block.cols >= start) & (block.cols < stop), self.outranked, self.tied,
                                    self.tie_order)

    def add_shard(self, G_shard: Endpoint, gallery_offset: int, exclusions: Any, query_offset: int,
                  config: RetrievalConfig, workspace: _Workspace) -> None:
        """Count one shard (rows [gallery_offset, gallery_offset + s) of the gallery) into the state against
        the positives' scores (``count_positives`` counts the positives themselves)."""
        b, s = len(self.Q), len(G_shard)
        if b == 0 or s == 0:
            return
        er, ec = _block_entries(exclusions, b, s, query_offset, gallery_offset, "exclusions")
        narrow = self.Q.scan.dtype == np.float32 or G_shard.scan.dtype == np.float32
        halves = ((0, s),) if narrow or s < 2 else ((0, s // 2), (s // 2, s))  # a float64 block: two halves
        for lo_col, hi_col in halves:
            keep = (ec >= lo_col) & (ec < hi_col)
            unit = _score_unit_fused if workspace.fused else _score_unit
            unit(self, G_shard[lo_col:hi_col], gallery_offset + lo_col, er[keep], ec[keep] - lo_col, config, workspace)
            self.seen += hi_col - lo_col

    def add_near(self, rows: np.ndarray, cols: np.ndarray, upper: np.ndarray, lower: np.ndarray) -> None:
        """Nearest-negative candidates (global gallery rows), their upper and lower bounds."""
        np.maximum.at(self.lower, rows, lower)
        keep = upper >= self.lower[rows]
        self.near.append((rows[keep], cols[keep], upper[keep]))
        if len(self.near) > 64:  # prune what later shards have outbid
            rows, cols, upper = (np.concatenate(parts) for parts in zip(*self.near))
            keep = upper >= self.lower[rows]
            self.near = [(rows[keep], cols[keep], upper[keep])]

    def _direct(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """Direct rank scores of (block row, global gallery row) pairs, computed in gallery order (locality)."""
        order = np.argsort(cols, kind="stable")
        x = np.empty(rows.size)
        x[order] = pair_rank_scores(self.Q, rows[order], self.G, cols[order] - self.g_offset)
        return x

    def partial(self, query_offset: int, gallery_ranges: tuple[tuple[int, int], ...]) -> RetrievalPartial:
        """Settle the deferred pairs and return the block's exact partial counts."""
        block, b = self.block, len(self.Q)
        t, cols = block.sorted_t, block.sorted_cols
        P = t.size
        counts, ties = self.counts[:P].copy(), self.ties.copy()
        if self.band:  # band items compared exactly with their positives (equal: the tie order decides)
            r, c, positions = (np.concatenate(parts) for parts in zip(*self.band))
            x = self._direct(r, c)
            equal = x == t[positions]
            if self.tie_order is None:  # gallery row order: the earlier gallery row wins
                wins = (x > t[positions]) | (equal & (c < cols[positions]))
            else:
                wins = x > t[positions]
                tied_pairs = np.flatnonzero(equal)
                if tied_pairs.size:
                    wins[tied_pairs] = self.tie_order.before(c[tied_pairs], cols[positions[tied_pairs]])
            counts += np.bincount(positions, weights=wins, minlength=P).astype(np.int64)
            ties += np.bincount(positions, weights=equal, minlength=P).astype(np.int64)
        score, index, similarity = np.full(b, -np.inf), np.full(b, -1, dtype=np.int64), np.full(b, np.nan)
        if self.near:  # the best negative by direct scores (equal scores: the lower gallery row)
            r, c, upper = (np.concatenate(parts) for parts in zip(*self.near))
            keep = upper >= self.lower[r]
            r, c = r[keep], c[keep]
            x = self._direct(r, c)
            first = np.lexsort((c, -x, r))
            first = first[np.r_[True, r[first][1:] != r[first][:-1]]]
            r, c, x = r[first], c[first], x[first]
            score[r], index[r] = x, c
            similarity[r] = _pair_similarities(self.Q, r, self.G, c - self.g_offset, x)
        outranked, tied = self.outranked.copy(), self.tied.copy()
        outranked[block.order] += counts
        tied[block.order] += ties
        return RetrievalPartial(query_offset, query_offset + b, gallery_ranges, block.indptr, block.cols, outranked,
                                tied, score, index, similarity)


def _row_keys(rows: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Keys that order (row, value) pairs by row, then value: int64 for float32 values (the row in the high
    32 bits, the value's order-preserving integer in the low ones), complex otherwise."""
    values = values + values.dtype.type(0)  # -0.0 -> +0.0: equal values get equal keys
    if values.dtype != np.float32:
        return rows + 1j * values
    bits = values.view(np.int32).astype(np.int64)
    ordered = np.where(bits < 0, -(bits & 0x7FFFFFFF), bits)  # IEEE: negative floats order by -magnitude
    return (rows.astype(np.int64) << 32) + ordered


_SAMPLE_RUNS, _SAMPLE_RUN = 8, 32


def _split_positives(S: np.ndarray | None, lo: np.ndarray, indptr: np.ndarray, rows: np.ndarray,
                     share: np.ndarray | None = None) -> np.ndarray:
    """Per row, the position (kernel order) of its lowest *sparse* positive; the row's end if it has none.

    ``lo`` holds the positives' lower band edges in kernel order, padded with +inf at index P. ``share``
    estimates, per positive, the share of the row's items that outrank it (from the block's earlier shards);
    without it, the share at or above each ``lo`` is estimated from 8 evenly spread runs of 32 columns (the
    whole row when it is short). Making positives [p, end) sparse costs about
    ``share(p) * _SPARSE_CANDIDATE_COST`` per item (the located candidates) plus ``_DENSE_PASS_COST`` per dense
    positive [start, p) (its passes); each row takes its cheapest split (all dense on a tie).
    """
    P = rows.size
    start, R = indptr[:-1], np.diff(indptr)
    if share is None:
        share = _sample_share(S, lo, indptr, rows)
    cost = share * _SPARSE_CANDIDATE_COST + (np.arange(P) - start[rows]) * _DENSE_PASS_COST
    best = np.lexsort((cost, rows))  # per row: its cheapest split first
    nonempty = np.flatnonzero(R > 0)
    heads = best[start[nonempty]]
    first_sparse = indptr[1:].copy()
    sparse = cost[heads] < R[nonempty] * _DENSE_PASS_COST
    first_sparse[nonempty[sparse]] = heads[sparse]
    return first_sparse


def _sample_share(S: np.ndarray, lo: np.ndarray, indptr: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Per positive, the share of a sample of its row's columns at or above its ``lo``."""
    b, s = S.shape
    P = rows.size
    start, R = indptr[:-1], np.diff(indptr)
    if s > _SAMPLE_RUNS * _SAMPLE_RUN:
        firsts = np.linspace(0, s - _SAMPLE_RUN, _SAMPLE_RUNS).astype(np.int64)
        sample = np.concatenate([S[:, a:a + _SAMPLE_RUN] for a in firsts], axis=1)
    else:
        sample = S
    m = sample.shape[1]
    share = np.empty(P)
    if R.max() <= 16:  # one comparison of the sample per k-th positive of every row
        for k in range(int(R.max())):
            positions = np.where(R > k, start + k, P)
            counted = np.count_nonzero(sample >= lo[positions][:, None], axis=1)
            share[positions[R > k]] = counted[R > k]
    else:
        step = max(1, (1 << 18) // m)
        for a in range(0, P, step):
            sl = slice(a, min(a + step, P))
            share[sl] = np.count_nonzero(sample[rows[sl]] >= lo[sl][:, None], axis=1)
    return share / m


def _nonzero_words(mask: np.ndarray) -> np.ndarray:
    """Indices of the nonzero 8-byte words of a C-contiguous bool matrix (rows a multiple of 8 long)."""
    return np.flatnonzero(mask.view(np.uint64).ravel() != 0)  # a bool scan: faster than on the words


def _expand_words(mask: np.ndarray, words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(row, column) of the True entries of a (rows x width) bool ``mask`` inside the given 8-byte words (width
    a multiple of 8, so no word spans two rows)."""
    word, byte = np.nonzero(mask.view(np.uint64).ravel()[words].view(np.uint8).reshape(-1, 8))
    words_per_row = mask.shape[1] // 8
    word = words[word]
    row = word // words_per_row
    return row, (word - row * words_per_row) * 8 + byte


def _block_product(Q_block: Endpoint, G_shard: Endpoint, similarity: str, workspace: _Workspace,
                   order: np.ndarray | None = None) -> np.ndarray:
    """The block's scan scores into the workspace: Q.scan @ G.scan.T, or (2 Q.scan) @ G.scan.T - |g|^2, with
    the query rows taken in ``order`` when given; in torch when the workspace has a device product (it answers
    None for a block that stays NumPy's: ``device.TorchProduct``)."""
    if workspace.product is not None:
        S = workspace.product(Q_block, G_shard, similarity, workspace, order)
        if S is not None:
            return S
    A, B = Q_block.scan, G_shard.scan
    if order is not None:
        A = A[order]
    if similarity == "squared_l2":
        A = 2 * A  # doubling is exact
    if sp.issparse(A) or sp.issparse(B):
        S = _product(A, B)
    else:
        S = np.matmul(A, B.T, out=workspace.get("scores", (A.shape[0], B.shape[0]), np.result_type(A, B)))
    if similarity == "squared_l2":
        S -= G_shard.sq.astype(S.dtype)
    return S


def _score_unit(state: _BlockState, G_shard: Endpoint, gallery_offset: int, er: np.ndarray, ec: np.ndarray,
                config: RetrievalConfig, workspace: _Workspace) -> None:
    """The shard kernel (``score_shard``): pass-decided counts into ``state``, band items and nearest-negative
    candidates deferred to it."""
    Q_block, block = state.Q, state.block
    b, s = len(Q_block), len(G_shard)
    indptr, rows, cols, t = block.indptr, block.rows, block.sorted_cols, block.sorted_t
    P = t.size
    local = cols - gallery_offset
    inunit = (local >= 0) & (local < s)
    narrow = Q_block.scan.dtype == np.float32 or G_shard.scan.dtype == np.float32
    dtype = np.result_type(Q_block.scan.dtype, G_shard.scan.dtype).type
    tol, lo, hi, key_lo, key_hi = state.bands(float(np.sqrt(G_shard.sq.max())), narrow, dtype, config.similarity)
    start, end = indptr[:-1], indptr[1:]
    first_sparse, order = end.copy(), None
    if P and state.seen:  # split by the earlier shards' counts, and put the rows with most dense positives first
        first_sparse = _split_positives(None, lo, indptr, rows, state.counts[:P] / state.seen)
        order = np.argsort(start - first_sparse, kind="stable")  # S row i is block row order[i]
    S = _block_product(Q_block, G_shard, config.similarity, workspace, order)
    srow = np.arange(b) if order is None else np.argsort(order)  # block row -> S row
    S[srow[er], ec] = -np.inf
    S[srow[rows[inunit]], local[inunit]] = -np.inf

    # nearest-negative candidates: items that may reach the best lower bound (block score - tol) of the
    # block's earlier shards, or, for rows without one yet, items within 2 tol of the row maximum
    near = state.lower - tol
    fresh = np.flatnonzero(state.lower == -np.inf)
    if fresh.size:
        row_max = (S.max(axis=1)[srow] if fresh.size == b else S[srow[fresh]].max(axis=1)).astype(np.float64)
        near[fresh] = np.where(row_max > -np.inf, row_max - 2.0 * tol[fresh], np.inf)
    near = _round_down(near, dtype)
    if P and not state.seen:  # the first shard: split by a sample of its scores
        first_sparse = _split_positives(S, lo, indptr, rows)

    counts = state.counts
    width = -(-s // 8) * 8
    words = width // 8  # 8-byte words per mask row
    mask = workspace.get("mask", (b, width), bool)
    mask[:, s:] = False  # padding columns: never set
    s_rows = np.arange(b) if order is None else order  # S row -> block row
    dense = (first_sparse - start)[s_rows]  # per S row: its dense positives [start, first_sparse)
    s_start = start[s_rows]
    levels = int(dense.max()) if P else 0
    # dense pass k takes every row's k-th dense positive: with S's rows in order of dense count the rows with a
    # k-th one are a prefix [0, reach[k]) of S; otherwise every row, those without it against P (+inf bands)
    reach = [b if order is None else int(np.count_nonzero(dense > k)) for k in range(levels)]
    positions = [np.where(dense[:n] > k, s_start[:n] + k, P) for k, n in enumerate(reach)]
    bounds = [(hi[pos][:, None], lo[pos][:, None]) for pos in positions]
    above_count = np.zeros((levels, b), dtype=np.int64)  # per level and S row: the items above hi
    group = max(1, min(b, _GROUP_BYTES // (width * S.itemsize)))
    level_masks = workspace.get("levels", (2, group, width), bool)
    level_masks[:, :, s:] = False

    # Both passes run on groups of S rows small enough to stay in cache from one pass to the next (after the
    # product, S is out of cache: a pass over a whole large block costs about twice as much). The candidate
    # pass: the candidates of the sparse positives and of the nearest negative (a row without sparse positives
    # has first_sparse = its end, the next row's first positive: its sparse threshold is +inf). The dense
    # passes: the bit count of the items above each dense positive's hi, and the items in its band [lo, hi]
    sparse_lo = np.where(first_sparse < end, lo[first_sparse], dtype(np.inf))
    threshold = np.minimum(near, sparse_lo)[s_rows][:, None]
    found = []
    for a in range(0, b, group):
        e = min(a + group, b)
        np.greater_equal(S[a:e], threshold[a:e], out=mask[a:e, :s])
        words_hit = _nonzero_words(mask[a:e])  # the 8-byte words holding candidates
        if words_hit.size:
            found.append(words_hit + a * words)
        for k in range(int(dense[a:e].max()) if levels else 0):
            m = min(e, reach[k]) - a
            h, l = bounds[k]
            above, at_least = level_masks[0, :m], level_masks[1, :m]
            np.greater(S[a:a + m], h[a:a + m], out=above[:, :s])
            above_count[k, a:a + m] = _count_true_rows(above)
            np.greater_equal(S[a:a + m], l[a:a + m], out=at_least[:, :s])
            at_least, above = at_least.view(np.uint64).ravel(), above.view(np.uint64).ravel()
            hit = np.flatnonzero(at_least != above)  # the 8-byte words holding items with lo <= item <= hi
            if hit.size:
                word, byte = np.nonzero((at_least[hit] ^ above[hit]).view(np.uint8).reshape(-1, 8))
                i, col = np.divmod(hit[word] * 8 + byte, width)
                state.band.append((s_rows[a + i], gallery_offset + col, positions[k][i + a]))
    for n, pos, count in zip(reach, positions, above_count):
        counts[pos] += count[:n]
    hits = np.concatenate(found) if found else np.empty(0, dtype=np.int64)
    chunk = max(1024, b * s // 256)  # words per chunk: its temporaries stay near 1 byte per block element
    Sflat = S.reshape(-1)
    sparse_counts = np.zeros(P + 1, dtype=np.int64)
    for a in range(0, hits.size, chunk):
        r, c = _expand_words(mask, hits[a:a + chunk])
        v = Sflat[r * s + c]
        r = r if order is None else order[r]  # block rows
        pick = np.flatnonzero(v >= near[r])
        score, margin = v[pick].astype(np.float64), tol[r[pick]]
        state.add_near(r[pick], gallery_offset + c[pick], score + margin, score - margin)
        sel = np.flatnonzero(v >= sparse_lo[r])
        if P == 0 or sel.size == 0:
            continue
        r, c, v = r[sel], c[sel], v[sel]
        fs = first_sparse[r]
        key = _row_keys(r, v)
        above = np.maximum(np.searchsorted(key_hi, key, side="left"), fs)  # sparse [fs, above): hi < v
        sparse_counts += np.bincount(fs, minlength=P + 1) - np.bincount(above, minlength=P + 1)
        maybe = np.flatnonzero((above < end[r]) & (lo[above] <= v))
        if maybe.size:  # sparse [above, upto): lo <= v <= hi
            upto = np.searchsorted(key_lo, key[maybe], side="right")
            n = upto - above[maybe]
            positions = np.repeat(above[maybe] - np.cumsum(n) + n, n) + np.arange(n.sum())
            state.band.append((np.repeat(r[maybe], n), gallery_offset + np.repeat(c[maybe], n), positions))
    del hits
    counts += np.cumsum(sparse_counts)


def _score_unit_fused(state: _BlockState, G_shard: Endpoint, gallery_offset: int, er: np.ndarray, ec: np.ndarray,
                      config: RetrievalConfig, workspace: _Workspace) -> None:
    """``_score_unit`` with its passes fused into one (``fused.count_block``): the same thresholds in the same
    precision, so the same counts, band items and nearest-negative candidates (no split, no row order)."""
    from vertebrae.scoring.retrieval.fused import count_block

    Q_block, block = state.Q, state.block
    s, rows, cols = len(G_shard), block.rows, block.sorted_cols
    local = cols - gallery_offset
    inunit = (local >= 0) & (local < s)
    narrow = Q_block.scan.dtype == np.float32 or G_shard.scan.dtype == np.float32
    dtype = np.result_type(Q_block.scan.dtype, G_shard.scan.dtype).type
    tol, lo, hi, _, _ = state.bands(float(np.sqrt(G_shard.sq.max())), narrow, dtype, config.similarity)
    S = _block_product(Q_block, G_shard, config.similarity, workspace)
    S[er, ec] = -np.inf
    S[rows[inunit], local[inunit]] = -np.inf
    fresh = state.lower == -np.inf
    near = _round_down(np.where(fresh, np.inf, state.lower - tol), dtype)
    share = state.counts[:lo.size - 1] / max(1, state.seen)  # reach estimates from the earlier shards
    counts, (r, c, positions), (nr, nc, score) = count_block(S, near, fresh, tol, lo, hi, block.indptr, share,
                                                             workspace)
    state.counts[:counts.size] += counts
    if r.size:
        state.band.append((r, gallery_offset + c, positions))
    if nr.size:
        state.add_near(nr, gallery_offset + nc, score + tol[nr], score - tol[nr])


def _count_positive_competitors(indptr, prow, pcol, t, inshard, outranked, tied, ties=None) -> None:
    """Add, per positive, the shard's positives of its query that outrank / tie it (direct scores).

    In ranking order (score descending, then the tie order: gallery row ascending, or ``ties``' id order) the
    in-shard positives ahead of a positive outrank it; those with exactly its score tie with it.
    """
    P = prow.size
    if P == 0 or not inshard.any():
        return
    key = pcol
    if ties is not None:  # the id order matters only among a query's positives with equal scores: look those up
        o = np.lexsort((t, prow))
        same = (prow[o][1:] == prow[o][:-1]) & (t[o][1:] == t[o][:-1])
        key = np.zeros(P, dtype=np.int64)
        if same.any():
            tied_positives = np.unique(np.concatenate([o[1:][same], o[:-1][same]]))
            key[tied_positives] = ties.rank(pcol[tied_positives])
    order = np.lexsort((key, -t, prow))
    rs, ts = prow[order], t[order]
    flag = inshard[order].astype(np.int64)
    before = np.cumsum(flag) - flag
    ahead = before - before[indptr[rs]]
    new_run = np.ones(P, dtype=bool)
    new_run[1:] = (rs[1:] != rs[:-1]) | (ts[1:] != ts[:-1])
    run = np.cumsum(new_run) - 1
    in_run = np.bincount(run, weights=flag).astype(np.int64)
    outranked[order] += ahead
    tied[order] += in_run[run] - flag
