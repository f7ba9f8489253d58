"""Scale-free scoring (issue 32): an embedding and any positive multiple of it that is finite in float64 score the
same under every protocol, and so do a regression target and its multiples.

Oracle: the same scorer at scale 1. Scales 1e-300 .. 1e300 underflowed or overflowed row norms before (labelled
scores of 1.0 or "one point", retrieval 0.0 / 1.0, zero-shot "zero-norm rows" / "zero prototype").
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest

from vertebrae import ContinuousOverlapScoringConfig, OverlapIndexScorer, OverlapScoringConfig
from vertebrae.core.errors import ValidationError
from vertebrae.scoring.retrieval import RetrievalConfig, RetrievalScorer
from vertebrae.scoring.zero_shot import ZeroShotScorer

SCALES = (1e-300, 1e-100, 1.0, 1e100, 1e300)
RNG = np.random.default_rng(0)
Y = np.repeat([0, 1, 2], 30)
CENTERS = RNG.normal(size=(3, 6))
X = CENTERS[Y] + 0.8 * RNG.normal(size=(90, 6))
T = X[:, 0] + 0.3 * RNG.normal(size=90)
G = RNG.normal(size=(40, 6))
Q = G[:20] + 0.5 * RNG.normal(size=(20, 6))
RELEVANCE = {i: {i: 1.0} for i in range(20)}


@functools.cache
def _labelled(scale, normalize):
    result = OverlapIndexScorer(OverlapScoringConfig(k=3, normalize_embeddings=normalize)).score(X * scale, Y, seed=0)
    return result.to_dict()


@functools.cache
def _regression(embedding_scale, target_scale):
    config = ContinuousOverlapScoringConfig(k=4, n_null_permutations=3)
    result = OverlapIndexScorer(config).score(X * embedding_scale, T * target_scale, target_type="regression", seed=0)
    return result.score, result.macro_score, result.loss_ratio, result.degeneracy


@functools.cache
def _retrieval(scale):  # the whole score document: metrics, per-query ranks and cosine similarities
    return RetrievalScorer(RetrievalConfig()).score(Q * scale, G * scale, RELEVANCE).to_dict()


@functools.cache
def _retrieval_benchmark(scale):  # through the stages: collapse detection on the normalised rows included
    from vertebrae import DatasetIdentity, RetrievalDataset
    from vertebrae.extractors import PrecomputedExtractor
    from vertebrae.protocols.retrieval import RetrievalBenchmark

    records = [(i, i, 1.0) for i in range(20)]
    dataset = RetrievalDataset.from_embeddings(Q * scale, G * scale, records, identity=DatasetIdentity.declared("s", "1"))
    (candidate,) = RetrievalBenchmark(dataset, [PrecomputedExtractor("raw")]).run().candidate_results
    return candidate.score.to_dict(), candidate.aggregate_valid


@functools.cache
def _zero_shot(scale):  # the whole result document: metrics, per-sample predictions and ranks
    return ZeroShotScorer().score(X * scale, (CENTERS + 0.1) * scale, Y, class_labels=[0, 1, 2],
                                  prompt_labels=[0, 1, 2]).to_dict()


def _close(a, b):
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return abs(a - b) <= 1e-9
    return a == b


@pytest.mark.parametrize("scale", [s for s in SCALES if s != 1.0])
def test_every_protocol_scores_a_multiple_of_an_embedding_as_the_embedding(scale):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for normalize in (True, False):  # cosine path and raw OverlapIndex path
            assert _close(_labelled(scale, normalize), _labelled(1.0, normalize))
        assert "degeneracy" not in _labelled(scale, False)  # collapse detection sees the rescaled values
        assert _close(_regression(scale, scale), _regression(1.0, 1.0))  # multiples of embedding and target
        assert _close(_regression(1.0, scale), _regression(1.0, 1.0))  # of the target alone (1e-20, 1e154 misscored)
        assert _close(_regression(scale, 1.0), _regression(1.0, 1.0))  # of the embedding alone
        assert _close(_retrieval(scale), _retrieval(1.0))
        assert _close(_retrieval_benchmark(scale), _retrieval_benchmark(1.0))
        assert _close(_zero_shot(scale), _zero_shot(1.0))


@pytest.mark.parametrize("similarity,scale,trouble", [("dot", 1e-300, "underflow"), ("squared_l2", 1e300, "overflow")])
def test_scale_bound_retrieval_similarities_are_refused_not_misranked(similarity, scale, trouble):
    # dot / squared_l2 similarities are reported in the embedding's units: out of float64's range they are refused
    with pytest.raises(ValidationError, match=f"{similarity} similarity would {trouble} float64.*Query embeddings"):
        RetrievalScorer(RetrievalConfig(similarity=similarity)).score(Q * scale, G * scale, RELEVANCE)


def test_subnormal_embeddings_score_as_the_embedding_in_every_protocol():
    # 1e-310 is subnormal: the power-of-two factor is capped at 2**1023 (it was inf), an exact scale-up (issue 48)
    scale = 1e-310
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for normalize in (True, False):
            assert _close(_labelled(scale, normalize), _labelled(1.0, normalize))
        assert _close(_regression(scale, 1.0), _regression(1.0, 1.0))
        assert _close(_retrieval(scale), _retrieval(1.0))
        assert _close(_retrieval_benchmark(scale), _retrieval_benchmark(1.0))
        assert _close(_zero_shot(scale), _zero_shot(1.0))
