"""Leave-one-out same-label retrieval, the computation behind ``LabelRetrievalMetric``.

Every row queries every *other* row (itself excluded); relevant = rows with the same label code. Similarity:
``cosine`` (rows L2-normalised; a zero row is an error), ``dot`` or ``squared_l2`` (ranked by the equivalent
``2 q.g - |g|^2``). The rank of a relevant row is 1 + the number of other rows scoring strictly higher, or equal
and earlier in row order. Work happens in blocks of ``query_block`` queries against all n rows (about
60 x query_block x n bytes); the metrics are ``retrieval.metrics``'s kernels over a ``DenseRanking``.
``label_options(RetrievalConfig(...))`` reads the metric's settings from a retrieval config.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from vertebrae.core.arrays import as_matrix, check_finite
from vertebrae.core.errors import ConfigError, ValidationError
from vertebrae.core.labels import describe_key
from vertebrae.scoring.retrieval.arithmetic import _row_norms
from vertebrae.scoring.retrieval.config import RetrievalConfig
from vertebrae.scoring.retrieval.metrics import DenseRanking, metric_names, per_query_metrics

#: LabelRetrievalMetric's settings, in its positional order, and the RetrievalConfig field each is read from
CONFIG_FIELDS = (("similarity", "similarity"), ("ks", "ks"), ("primary", "primary_metric"),
                 ("query_block", "query_block_size"))


def label_options(config: Any, *, owner: str = "LabelRetrievalMetric") -> dict[str, Any]:
    """``LabelRetrievalMetric``'s settings from a ``RetrievalConfig`` (the established library's
    ``LabelRetrievalMetric(RetrievalConfig(...))``): similarity, ks, primary = ``primary_metric`` and query_block =
    ``query_block_size``. Every row ranks all n rows, so the gallery block and the comparison cap do not apply;
    ``bidirectional=True`` is refused (leave-one-out retrieval has one direction), as are conventions other than
    ``vertebrae`` (``conventions``: they name query-gallery tools)."""
    if not isinstance(config, RetrievalConfig):
        raise ConfigError(f"{owner}: expected a RetrievalConfig, got {type(config).__name__}")
    if config.bidirectional:
        raise ConfigError(f"{owner}: RetrievalConfig.bidirectional=True does not apply to leave-one-out same-label "
                          "retrieval (every row is both a query and a candidate)")
    if config.conventions != "vertebrae":
        raise ConfigError(f"{owner}: RetrievalConfig.conventions={config.conventions!r} applies to query-gallery "
                          "retrieval; leave-one-out same-label retrieval follows vertebrae's conventions only")
    return {option: getattr(config, name) for option, name in CONFIG_FIELDS}


def _divide_rows(matrix: np.ndarray | sp.csr_matrix, norms: np.ndarray) -> np.ndarray | sp.csr_matrix:
    if sp.issparse(matrix):
        out = matrix.copy()
        out.data = out.data / np.repeat(norms, np.diff(out.indptr))
        return out
    return matrix / norms[:, None]


def prepare_rows(embeddings: Any, similarity: str, row_ids: Sequence[str],
                 where: str) -> tuple[np.ndarray | sp.csr_matrix, np.ndarray | None]:
    """(float64 rows as scored, |row|^2 for squared_l2 else None); refuses non-finite and, for cosine, zero
    rows, naming ``where`` (the metric) and the row ids."""
    matrix = as_matrix(embeddings, what="embeddings")
    check_finite(matrix, row_ids, what="embeddings")
    matrix = matrix.astype(np.float64) if matrix.dtype != np.float64 else matrix
    if similarity == "cosine":
        norms = _row_norms(matrix)
        zero = np.flatnonzero(norms == 0)
        if zero.size:
            shown = ", ".join(f"row id {describe_key(row_ids[i])} (index {i})" for i in zero[:10])
            more = ", ..." if zero.size > 10 else ""
            raise ValidationError(f"{where}: cosine similarity needs nonzero rows; {zero.size} zero-norm row(s): "
                                  f"{shown}{more}")
        return _divide_rows(matrix, norms), None
    if similarity == "squared_l2":
        if sp.issparse(matrix):
            return matrix, np.asarray(matrix.multiply(matrix).sum(axis=1)).ravel()
        return matrix, np.einsum("ij,ij->i", matrix, matrix)
    return matrix, None


def label_retrieval(matrix: np.ndarray | sp.csr_matrix, squared: np.ndarray | None, codes: np.ndarray,
                    row_ids: Sequence[str], *, similarity: str, ks: Sequence[int], query_block: int,
                    where: str) -> tuple[np.ndarray, np.ndarray]:
    """(per-query metrics, rows x ``metric_names(ks)``, NaN for a query without positives; per query whether a
    relevant and a non-relevant row tied) of prepared rows (``prepare_rows``) with label ``codes``."""
    n = len(codes)
    names = metric_names(ks)
    per_query = np.full((n, len(names)), np.nan)
    tied = np.zeros(n, dtype=bool)
    transposed = matrix.T.tocsr() if sp.issparse(matrix) else matrix.T
    for start in range(0, n, query_block):
        stop = min(start + query_block, n)
        with np.errstate(over="ignore", invalid="ignore"):  # overflow is reported below, naming the rows
            block = matrix[start:stop] @ transposed
            scores = np.asarray(block.toarray() if sp.issparse(block) else block, dtype=np.float64)
            if squared is not None:
                scores = 2.0 * scores - squared[None, :]
        bad = np.flatnonzero(~np.isfinite(scores).all(axis=1))
        if bad.size:
            shown = ", ".join(f"row id {describe_key(row_ids[start + i])} (index {start + i})" for i in bad[:10])
            raise ValidationError(f"{where}: {similarity} similarity overflowed for query row(s) {shown}; "
                                  "rescale the embeddings")
        rows = np.arange(stop - start)
        scores[rows, start + rows] = -np.inf  # the query itself ranks after every other row
        _score_block(scores, codes, start, per_query, tied, names, ks)
    return per_query, tied


def _score_block(scores, codes, start, per_query, tied, names, ks) -> None:
    b = scores.shape[0]
    query = start + np.arange(b)
    order = np.argsort(-scores, axis=1, kind="stable")  # descending score, ties in row order
    relevant = (codes[order] == codes[query][:, None]) & (order != query[:, None])
    keep = relevant.any(axis=1)
    if not keep.any():
        return
    order, relevant, query = order[keep], relevant[keep], query[keep]
    sorted_scores = np.take_along_axis(scores[keep], order, axis=1)
    tied[query] = ((sorted_scores[:, 1:] == sorted_scores[:, :-1]) & (relevant[:, 1:] != relevant[:, :-1])).any(axis=1)
    values = per_query_metrics(DenseRanking(relevant), ks)
    per_query[query] = np.column_stack([values[name] for name in names])
