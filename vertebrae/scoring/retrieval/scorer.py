"""``RetrievalScorer``: exact retrieval of every query against the whole gallery, inside a memory budget.

Memory admission (``admit``), before any work: ``8 (nq + ng) d + 8 min(qbs, nq) min(gbs, ng)`` bytes (both
directions when bidirectional) must fit ``max_dense_bytes`` (a sparse endpoint counts ``16 nnz + 8 (rows + 1)``
instead of ``8 rows d``: it stays sparse), and ``nq ng`` must not exceed ``max_comparisons`` when set;
otherwise ``BudgetError``. What is then allocated stays inside that: float rows are used in place and the only
endpoint copies are the scan rows (float32; float64 rows beyond the float32 range; non-float input is first
converted to float64); each worker thread holds one unit (``kernel``), so the scorer runs only as many workers
as ``max_dense_bytes`` holds score blocks beside the endpoints.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from vertebrae.core.arrays import paired_matrices
from vertebrae.core.errors import BudgetError, ConfigError, ValidationError
from vertebrae.scoring.retrieval.config import RetrievalConfig
from vertebrae.scoring.retrieval.conventions import tie_order
from vertebrae.scoring.retrieval.device import block_product, resolve_device
from vertebrae.scoring.retrieval.finalize import finalize
from vertebrae.scoring.retrieval.fused import use_fused
from vertebrae.scoring.retrieval.inputs import (
    check_representable,
    _row_id_keys,
    eligible_relevance,
    exclusion_matrix,
    prepare_endpoint,
    relevance_matrix,
)
from vertebrae.scoring.retrieval.kernel import _Workspace, score_query_block
from vertebrae.scoring.retrieval.partial import RetrievalPartial, merge_partials
from vertebrae.scoring.retrieval.positives import positive_scores
from vertebrae.scoring.retrieval.results import RetrievalResult, RetrievalScore

_SCAN = "float32"  # the scan precision the scorer asks for (float64 only for rows beyond _FLOAT32_SAFE_NORM)


def _endpoint_bytes(matrix: Any) -> int:
    if sp.issparse(matrix):
        return 16 * int(matrix.nnz) + 8 * (matrix.shape[0] + 1)
    return 8 * int(matrix.shape[0]) * int(matrix.shape[1])


def admit(config: RetrievalConfig, queries: Any, gallery: Any) -> None:
    """Memory admission (module docstring): BudgetError saying what to lower."""
    nq, ng = int(queries.shape[0]), int(gallery.shape[0])
    endpoints = _endpoint_bytes(queries) + _endpoint_bytes(gallery)
    directions = [(nq, ng)] + ([(ng, nq)] if config.bidirectional else [])
    block = max(8 * min(config.query_block_size, a) * min(config.gallery_block_size, b) for a, b in directions)
    total = endpoints + block
    if total > config.max_dense_bytes:
        if endpoints > config.max_dense_bytes:
            hint = ("the float64 endpoints alone exceed it: split the work into partial scores (a retrieval "
                    "benchmark: scoring.query_shards / scoring.gallery_shards; in process: vertebrae.stages."
                    "retrieval_fanout.score_retrieval_partial over row ranges, then merge_retrieval_partials) or "
                    "raise RetrievalConfig.max_dense_bytes")
        else:
            hint = ("lower RetrievalConfig.query_block_size or RetrievalConfig.gallery_block_size, or raise "
                    "RetrievalConfig.max_dense_bytes")
        raise BudgetError(f"retrieval needs {total:,} bytes (float64 endpoints {endpoints:,} + score block {block:,} "
                          f"= {min(config.query_block_size, nq)} x {min(config.gallery_block_size, ng)} x 8), more "
                          f"than RetrievalConfig.max_dense_bytes={config.max_dense_bytes:,}; {hint}")
    if config.max_comparisons is not None and nq * ng > config.max_comparisons:
        raise BudgetError(f"retrieval compares {nq:,} queries x {ng:,} gallery items = {nq * ng:,} pairs, more than "
                          f"RetrievalConfig.max_comparisons={config.max_comparisons:,}; raise it or split the work "
                          "(scoring.query_shards / scoring.gallery_shards)")


class RetrievalScorer:
    """Exact retrieval of every query against the whole gallery, in (query block x gallery block) units.

    ``threads``: how many query blocks are scored at once (None: as many as the loaded BLAS would use
    threads, e.g. ``OMP_NUM_THREADS``), fewer when ``max_dense_bytes`` cannot hold that many score blocks
    beside the endpoints. Results do not depend on it.

    ``device``: where the block products run (``device.resolve_device``): "cpu" (default, NumPy), "auto" (a
    CUDA GPU when torch sees one, else "cpu"), "cuda" / "cuda:N", or "torch:cpu" (the torch path on the CPU).
    Block products only filter, so every device gives the identical score document; it is no part of the
    config (no fingerprint changes with it).

    ``kernel``: how each score block is counted (``fused.use_fused``): "auto" (default: the one-pass numba kernel
    for large work, the NumPy passes otherwise), "fused" or "numpy" (the reference). The same document either way;
    no part of the config.
    """

    def __init__(self, config: RetrievalConfig | None = None, *, threads: int | None = None,
                 device: str = "cpu", kernel: str = "auto") -> None:
        if config is not None and not isinstance(config, RetrievalConfig):
            raise ValidationError(f"RetrievalScorer config must be a RetrievalConfig, got {type(config).__name__}")
        if threads is not None and (isinstance(threads, (bool, np.bool_)) or not isinstance(threads, (int, np.integer))
                                    or threads < 1):
            raise ConfigError(f"RetrievalScorer threads must be a positive integer or None, got {threads!r}")
        self.config = config if config is not None else RetrievalConfig()
        self.threads = None if threads is None else int(threads)
        self.device = resolve_device(device)
        use_fused(kernel, 0)  # validates the name
        self.kernel = kernel

    def workers(self, queries: Any, gallery: Any) -> int:
        """Query blocks scored at once: ``threads`` (default: the BLAS thread count), capped so that the
        endpoints plus one score block per worker fit ``max_dense_bytes`` (at least 1)."""
        config = self.config
        nq, ng = int(queries.shape[0]), int(gallery.shape[0])
        threads = self.threads if self.threads is not None else blas_threads()
        directions = [(nq, ng)] + ([(ng, nq)] if config.bidirectional else [])
        block = max(8 * min(config.query_block_size, a) * min(config.gallery_block_size, b) for a, b in directions)
        spare = config.max_dense_bytes - _endpoint_bytes(queries) - _endpoint_bytes(gallery)
        return max(1, min(threads, spare // max(1, block)))

    def score(self, queries: Any, gallery: Any, relevance: Any, *, query_ids: Sequence[str] | None = None,
              gallery_ids: Sequence[str] | None = None, exclusions: Any = None) -> RetrievalScore:
        """Score queries against the gallery. ``relevance``: grades (CSR, array or {qi: {gi: grade}});
        ``exclusions``: excluded pairs; ids: semantic-key strings used in messages and worst queries."""
        config = self.config
        Q, G = paired_matrices(queries, gallery, what=("Query embeddings", "Gallery embeddings"),
                               need="retrieval needs at least one query and one gallery item")
        nq, d = Q.shape
        ng = G.shape[0]
        qkeys = _row_id_keys(query_ids, nq, "Query embeddings")
        gkeys = _row_id_keys(gallery_ids, ng, "Gallery embeddings")
        admit(config, Q, G)
        grades = relevance_matrix(relevance, (nq, ng), query_ids=qkeys, gallery_ids=gkeys)
        excluded = exclusion_matrix(exclusions, (nq, ng))
        forward_relevance = eligible_relevance(grades, excluded, query_ids=qkeys, what="query")
        reverse_relevance = None
        if config.bidirectional:
            reverse_relevance = eligible_relevance(forward_relevance.T.tocsr(), None, query_ids=gkeys,
                                                   what="gallery item")
        scan = _SCAN
        workers = self.workers(Q, G)
        Qp = prepare_endpoint(Q, config.similarity, what="Query embeddings", row_ids=qkeys, scan=scan, workers=workers)
        Gp = prepare_endpoint(G, config.similarity, what="Gallery embeddings", row_ids=gkeys, scan=scan,
                              workers=workers)
        check_representable(config.similarity, [Qp], [Gp], ("Query embeddings", "Gallery embeddings"))
        meta = {"n_dimensions": int(d), "query_sparse": bool(sp.issparse(Q)), "gallery_sparse": bool(sp.issparse(G))}
        product = block_product(self.device, (Qp.scan, Gp.scan))  # None: NumPy
        fused = use_fused(self.kernel, nq * ng * (2 if config.bidirectional else 1))
        forward = _score_direction(Qp, Gp, forward_relevance, excluded, config, qkeys, gkeys, "forward", meta,
                                   workers, product, fused)
        reverse = None
        if config.bidirectional:
            reverse_excluded = None if excluded is None else excluded.T.tocsr()
            reverse = _score_direction(Gp, Qp, reverse_relevance, reverse_excluded, config, gkeys, qkeys, "reverse",
                                       {**meta, "query_sparse": meta["gallery_sparse"],
                                        "gallery_sparse": meta["query_sparse"]}, workers, product, fused)
        primary = forward.score if reverse is None else (forward.score + reverse.score) / 2.0
        return RetrievalScore(forward, reverse, primary)


def _score_direction(Q, G, relevance, exclusions, config, qkeys, gkeys, direction, metadata,
                     workers: int, product: Any = None, fused: bool = False) -> RetrievalResult:
    """One direction: positives, every query block over every gallery shard (the same kernel and state as
    ``score_shard``; a block's partial covers the whole gallery), merge, finalize. Query blocks are spread
    over ``workers`` threads (``map_blocks``); the partials do not depend on it, nor on the block ``product``
    (``device.block_product``: torch on a device, shared by the threads; None: NumPy), nor on ``fused``. Equal
    scores are ordered by the config's conventions (``conventions.tie_order`` over ``gkeys``)."""
    positives = positive_scores(Q, G, relevance, config=config, workers=workers)
    ties = tie_order(config.conventions, gkeys)
    nq, ng = len(Q), len(G)
    starts = range(0, ng, config.gallery_block_size)
    shards = [(gs, G[gs:min(gs + config.gallery_block_size, ng)]) for gs in starts]  # views (CSR: sliced once)
    local = threading.local()  # one workspace per worker thread, reused by all its blocks

    def query_block(qs: int) -> RetrievalPartial:
        qe = min(qs + config.query_block_size, nq)
        workspace = getattr(local, "workspace", None) or _Workspace(product, fused)
        local.workspace = workspace
        return score_query_block(Q[qs:qe], G, shards, query_offset=qs, gallery_offset=0,
                                 positives=positives.rows(qs, qe),
                                 exclusions=None if exclusions is None else exclusions[qs:qe], config=config,
                                 workspace=workspace, ties=ties)

    merged = merge_partials(map_blocks(query_block, range(0, nq, config.query_block_size), workers))
    return finalize(merged, positives, config, n_gallery=ng, query_ids=qkeys, gallery_ids=gkeys,
                    direction=direction, metadata=metadata)


def map_blocks(fn, items: Sequence[int], workers: int) -> list[Any]:
    """``[fn(i) for i in items]``, on ``workers`` threads when > 1. Each thread then runs single-threaded BLAS
    (threadpoolctl, for the call's duration), so the process uses ``workers`` cores in all: while one thread
    multiplies, another post-processes (numpy releases the GIL in both)."""
    if workers <= 1 or len(items) <= 1:
        return [fn(i) for i in items]
    from concurrent.futures import ThreadPoolExecutor

    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"), ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(fn, items))


def blas_threads() -> int:
    """The thread count the loaded BLAS would use (1 if unknown)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:  # pragma: no cover - a dependency of scikit-learn
        return 1
    counts = [int(pool.get("num_threads") or 1) for pool in threadpool_info() if pool.get("user_api") == "blas"]
    return max(counts, default=1)
