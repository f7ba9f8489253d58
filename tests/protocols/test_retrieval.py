"""RetrievalBenchmark in one process: branch encoders, gallery-fitted compression and extractors, memory bounds."""

from __future__ import annotations

import numpy as np
import pytest

from vertebrae import DatasetIdentity, MemoryConfig, RetrievalDataset
from vertebrae.compression import EmbeddingCompressionConfig, fit_paired_compression
from vertebrae.core.errors import BudgetError
from vertebrae.extractors import CallableRetrievalExtractor, PrecomputedExtractor, SklearnExtractor
from vertebrae.protocols.retrieval import RetrievalBenchmark
from vertebrae.scoring.retrieval import RetrievalConfig, RetrievalScorer

RNG = np.random.default_rng(5)
G = RNG.normal(size=(80, 10))
TARGET = RNG.integers(0, 80, size=40)
Q = G[TARGET] + 0.2 * RNG.normal(size=(40, 10))
RECORDS = [(i, int(t), 1.0 + (i % 2)) for i, t in enumerate(TARGET)]
ID = DatasetIdentity.declared("synthetic", "1")


def query_half(rows):
    return np.asarray(rows)[:, :5] * 2.0


def gallery_half(rows):
    return np.asarray(rows)[:, :5]


def _direct(Qe, Ge, config=RetrievalConfig()):
    dataset = RetrievalDataset.from_embeddings(Q, G, RECORDS, identity=ID)
    p = dataset.protocol
    return RetrievalScorer(config).score(Qe, Ge, p.relevance, query_ids=p.query_ids, gallery_ids=p.gallery_ids, exclusions=p.exclusions)


def test_branch_encoder_and_same_modality_candidates_match_direct_scoring():
    dataset = RetrievalDataset.from_arrays(Q, G, RECORDS, identity=ID, query_modality="vector", gallery_modality="vector")
    branch = CallableRetrievalExtractor("halves", query_half, gallery_half)
    result = RetrievalBenchmark(dataset, [branch]).run()
    (candidate,) = result.candidate_results
    assert candidate.score.to_dict() == _direct(query_half(Q), gallery_half(G)).to_dict()


def test_learning_extractor_is_fitted_on_the_gallery_and_compression_too():
    from sklearn.decomposition import PCA

    dataset = RetrievalDataset.from_embeddings(Q, G, RECORDS, identity=ID)
    compression = EmbeddingCompressionConfig(method="pca", n_components=3)
    result = RetrievalBenchmark(dataset, [SklearnExtractor("pca6", PCA(6), cache_identity="pca6")],
                                compression_config=compression).run()
    raw, compressed = result.candidate_results
    pca = PCA(6, random_state=0).fit(G)  # the extractor seeds unset random_state with 0
    assert raw.score.to_dict() == _direct(pca.transform(Q), pca.transform(G)).to_dict()
    fitted = fit_paired_compression(pca.transform(G), compression)
    assert compressed.name == "pca6[pca_3]" and compressed.compression_metadata["fit_side"] == "gallery"
    assert compressed.score.to_dict() == _direct(fitted.transform(pca.transform(Q)), fitted.compressed_reference).to_dict()


def test_memory_config_bounds_endpoint_materialisation():
    dataset = RetrievalDataset.from_embeddings(Q, G, RECORDS, identity=ID)
    with pytest.raises(BudgetError, match="'gallery'"):
        RetrievalBenchmark(dataset, [PrecomputedExtractor("raw")], memory_config=MemoryConfig(max_resident_bytes=1000)).run()
    spilled = RetrievalBenchmark(dataset, [PrecomputedExtractor("raw")],
                                 memory_config=MemoryConfig(max_resident_bytes=1000, allow_disk_spill=True)).run()
    plain = RetrievalBenchmark(dataset, [PrecomputedExtractor("raw")]).run()
    assert spilled.candidate_results[0].score.to_dict() == plain.candidate_results[0].score.to_dict()
    assert plain.ranked_results()[0].primary_score == _direct(Q, G).primary_score


# --------------------------------------------------------------------------------------------------
# collapsed embeddings (issue 15, item 1)


def _constant(rows):
    return np.ones((len(rows), 4))


def _identity(rows):
    return np.asarray(rows, dtype=np.float64)


def test_a_constant_embedding_cannot_rank_above_a_real_one():
    # every query's one relevant item is one of gallery rows 0-2: constant vectors tie everywhere, ties go to
    # gallery row order, so they put the relevant item in the top 3 every time, ahead of a real, noisy embedding
    from vertebrae.reports.markdown import render_retrieval_markdown
    from vertebrae.scoring.degenerate import DegenerateEmbeddingWarning

    rng = np.random.default_rng(1)
    gallery = rng.normal(size=(30, 6))
    queries = gallery[np.arange(20) % 3] + 1.5 * rng.normal(size=(20, 6))
    records = [(i, i % 3, 1.0) for i in range(20)]
    dataset = RetrievalDataset.from_arrays(queries, gallery, records, identity=ID, query_modality="vector",
                                           gallery_modality="vector")
    config = RetrievalConfig(ks=(3,), primary_metric="recall@3")
    candidates = [CallableRetrievalExtractor("constant", _constant, _constant),
                  CallableRetrievalExtractor("real", _identity, _identity)]
    with pytest.warns(DegenerateEmbeddingWarning, match="Gallery embeddings \\(L2-normalised\\): all 30 rows are one point"):
        result = RetrievalBenchmark(dataset, candidates, retrieval_config=config).run()
    constant, real = result.candidate_results
    assert constant.primary_score == 1.0 > real.primary_score  # the meaningless score would have ranked first
    assert not constant.aggregate_valid and real.aggregate_valid
    assert [f["what"] for f in constant.score.forward.metadata["degenerate"]] == [
        "Query embeddings (L2-normalised)", "Gallery embeddings (L2-normalised)"]
    assert constant.score.forward.warnings[0].startswith("degenerate-embedding: Query embeddings (L2-normalised): ")
    assert "degenerate" not in real.score.forward.metadata
    assert [r.name for r in result.ranked_results()] == ["real"] and result.quality_cohort() == ["real"]
    doc = result.to_dict()
    assert doc["ranking"] == ["real"] and type(result).from_dict(doc).to_dict() == doc
    assert [(row["rank"], row["extractor"]) for row in result.table_rows()] == [(1, "real"), (None, "constant")]
    text = render_retrieval_markdown(result)
    assert "Not ranked: **constant**: Gallery embeddings (L2-normalised): all 30 rows are one point" in text
    assert "- **constant**: degenerate-embedding: Gallery embeddings" in text


def text_features(rows):
    return np.array([[len(text), text.count("a") + 1.0] for text in rows])


def test_python_lists_of_texts_are_endpoints():
    # issue 32: from_arrays took lists of texts, the run failed with "'list' object has no attribute 'shape'"
    dataset = RetrievalDataset.from_arrays(["aa", "b"], ["aa", "b", "cc"], [(0, 0, 1.0), (1, 1, 1.0)], identity=ID,
                                           query_modality="text", gallery_modality="text")
    extractor = CallableRetrievalExtractor("features", text_features, text_features, cache_identity="features-1")
    (candidate,) = RetrievalBenchmark(dataset, [extractor]).run().candidate_results
    assert candidate.score.to_dict() == RetrievalScorer(RetrievalConfig()).score(
        text_features(["aa", "b"]), text_features(["aa", "b", "cc"]), {0: {0: 1.0}, 1: {1: 1.0}}).to_dict()
