"""Exact, memory-bounded query--gallery retrieval scoring.

Every metric is a function of the ranks of each query's positives, and a rank is a count, so the work splits
into units of one (query block, gallery shard) pair that add up. The modules, in the order data flows:

- ``config``: ``RetrievalConfig``; ``conventions``: the named conventions (``CONVENTIONS``: vertebrae, trec_eval,
  beir, mteb, sentence_transformers) whose tie order, NDCG gain, MRR / MAP cutoffs and default ks the metrics follow.
- ``inputs``: relevance, exclusions and prepared endpoints (``prepare_endpoint``).
- ``arithmetic``: the defining float64 pair arithmetic and the block products that only filter.
- ``positives``: the eligible positives and their direct scores.
- ``kernel``: one unit's exact partial counts (``score_shard``); ``partial``: ``RetrievalPartial`` and
  ``merge_partials``.
- ``metrics``: one kernel per metric (formula in its docstring), shared with ``LabelRetrievalMetric``.
- ``finalize``: the metrics and diagnostics from merged counts; ``results``: the result documents.
- ``scorer``: ``RetrievalScorer``, which runs every unit in memory under the admission rule.
"""

from vertebrae.scoring.retrieval.arithmetic import row_sq_norms
from vertebrae.scoring.retrieval.config import RetrievalConfig
from vertebrae.scoring.retrieval.conventions import CONVENTIONS, Conventions
from vertebrae.scoring.retrieval.finalize import finalize
from vertebrae.scoring.retrieval.inputs import (
    Endpoint,
    eligible_relevance,
    exclusion_matrix,
    prepare_endpoint,
    relevance_matrix,
)
from vertebrae.scoring.retrieval.kernel import score_shard
from vertebrae.scoring.retrieval.metrics import log_gain
from vertebrae.scoring.retrieval.partial import RetrievalPartial, merge_partials
from vertebrae.scoring.retrieval.positives import PositivePairs, pair_rank_scores, positive_scores
from vertebrae.scoring.retrieval.results import RetrievalResult, RetrievalScore
from vertebrae.scoring.retrieval.scorer import RetrievalScorer, admit

__all__ = [
    "CONVENTIONS",
    "Conventions",
    "Endpoint",
    "PositivePairs",
    "RetrievalConfig",
    "RetrievalPartial",
    "RetrievalResult",
    "RetrievalScore",
    "RetrievalScorer",
    "admit",
    "eligible_relevance",
    "exclusion_matrix",
    "finalize",
    "log_gain",
    "merge_partials",
    "pair_rank_scores",
    "positive_scores",
    "prepare_endpoint",
    "relevance_matrix",
    "row_sq_norms",
    "score_shard",
]
