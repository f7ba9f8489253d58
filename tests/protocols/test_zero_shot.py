"""ZeroShotBenchmark with CallableRetrievalExtractor branch encoders: candidates, compression, caching, memory."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.decomposition import PCA

from vertebrae import BenchmarkDataset, DatasetIdentity
from vertebrae.compression import EmbeddingCompressionConfig
from vertebrae.core.errors import BudgetError, ValidationError, VertebraeWarning
from vertebrae.core.memory import MemoryConfig
from vertebrae.data.zero_shot import ZeroShotDataset
from vertebrae.extractors import PrecomputedExtractor, SklearnExtractor
from vertebrae.extractors.callable import CallableRetrievalExtractor
from vertebrae.core.config import CacheConfig, EmbeddingConfig
from vertebrae.protocols.zero_shot import ZeroShotBenchmark, ZeroShotCandidate
from vertebrae.scoring.zero_shot import ZeroShotConfig, ZeroShotScorer
from vertebrae.stages.common import EmbeddingBlock
from vertebrae.stages.zero_shot import score_zero_shot

CLASSES = ("alpha", "beta", "gamma")
CENTERS = np.random.default_rng(11).normal(size=(3, 8))


def encode_samples(rows):
    return np.asarray(rows, dtype=np.float64)


def encode_texts(rows):
    out = np.zeros((len(rows), CENTERS.shape[1]))
    for i, text in enumerate(rows):
        for c, name in enumerate(CLASSES):
            if name in text:
                out[i] += CENTERS[c]
        out[i, 1] += 0.1 * len(text)
    return out


def _zero_shot(prompts=None):
    rng = np.random.default_rng(2)
    y = rng.integers(0, 3, 75)
    X = CENTERS[y] + rng.normal(size=(75, 8))
    dataset = BenchmarkDataset.from_arrays(X, np.array(CLASSES)[y], identity=DatasetIdentity.declared("toy", "1"))
    prompts = prompts or {"alpha": ["an alpha", "one alpha"], "beta": "a beta", "gamma": "a gamma"}
    return ZeroShotDataset.from_dataset(dataset, prompts)


def _extractor(name="toy", **kwargs):
    return CallableRetrievalExtractor(name, encode_samples, encode_texts, **kwargs)


def test_scores_equal_the_scorer_on_directly_embedded_endpoints():
    zs = _zero_shot()
    result = ZeroShotBenchmark(zs, [_extractor()], sample_branch="query", text_branch="gallery",
                               embedding_config=EmbeddingConfig(batch_size=10, shards=3)).run()
    direct = ZeroShotScorer().score(zs.dataset.inputs, encode_texts(list(zs.protocol.prompt_texts)),
                                    list(np.asarray(zs.dataset.label_keys)), class_labels=list(CLASSES),
                                    prompt_labels=list(zs.protocol.prompt_labels))
    got = result.candidate_results[0]
    assert got.zero_shot.metrics == direct.metrics and got.zero_shot.confusion_matrix == direct.confusion_matrix
    assert got.zero_shot.metrics["accuracy"] > 0.6
    assert 0.0 <= got.overlap.score <= 1.0  # OverlapIndex beside, not combined
    assert got.primary_score == got.zero_shot.metrics["accuracy"]
    doc = result.to_dict()
    assert doc["candidate_results"][0]["overlap"]["score"] == got.overlap.score
    assert type(result).from_dict(doc).to_dict() == doc


def test_per_candidate_branches_and_qualification():
    zs = _zero_shot()
    swapped = CallableRetrievalExtractor("swapped", encode_texts, encode_samples)  # samples through 'gallery'
    result = ZeroShotBenchmark(zs, [ZeroShotCandidate(_extractor(), "query", "gallery"),
                                    ZeroShotCandidate(swapped, "gallery", "query")]).run()
    a, b = result.candidate_results
    assert a.zero_shot.metrics == b.zero_shot.metrics
    assert b.embedding_metadata["sample_branch"] == "gallery"
    with pytest.raises(ValidationError, match="'pixels' declares no branches"):
        ZeroShotBenchmark(zs, [PrecomputedExtractor("pixels")], sample_branch="query", text_branch="gallery")
    with pytest.raises(ValidationError, match="'toy': text_branch is required"):
        ZeroShotBenchmark(zs, [_extractor()], sample_branch="query")
    with pytest.raises(ValidationError, match="'toy': sample_branch 'image' is not one of its branches"):
        ZeroShotCandidate(_extractor(), "image", "gallery")
    learner = SklearnExtractor("pca", PCA(2), cache_identity="pca2")
    with pytest.raises(ValidationError, match="'pca' learns from data"):
        ZeroShotCandidate(learner, None, None)
    with pytest.raises(ValidationError, match="already has an extractor named 'toy'"):
        ZeroShotBenchmark(zs, [_extractor(), _extractor()], sample_branch="query", text_branch="gallery")


def test_paired_compression_is_fitted_on_samples_and_applied_to_prompts():
    zs = _zero_shot()
    config = EmbeddingCompressionConfig(method="pca", n_components=3)
    result = ZeroShotBenchmark(zs, [_extractor()], sample_branch="query", text_branch="gallery",
                               compression_config=config).run()
    raw, compressed = result.candidate_results
    assert compressed.name == "toy[pca_3]" and compressed.compression_metadata["fit_side"] == "samples"
    pca = PCA(3, random_state=config.random_state).fit(zs.dataset.inputs)
    direct = ZeroShotScorer().score(pca.transform(zs.dataset.inputs), pca.transform(encode_texts(list(zs.protocol.prompt_texts))),
                                    list(np.asarray(zs.dataset.label_keys)), class_labels=list(CLASSES),
                                    prompt_labels=list(zs.protocol.prompt_labels))
    assert compressed.zero_shot.metrics == pytest.approx(direct.metrics)
    assert compressed.zero_shot.metadata["n_dimensions"] == 3


def test_mixed_endpoints_are_refused_even_when_dimensions_match():
    protocol = _zero_shot().protocol
    samples = EmbeddingBlock(np.random.default_rng(0).normal(size=(75, 4)), protocol.sample_ids)
    prompts = EmbeddingBlock(np.random.default_rng(1).normal(size=(4, 4)), protocol.prompt_ids())
    from vertebrae.scoring.overlap import OverlapScoringConfig

    for pair_s, pair_p, message in [("aaaa", None, "sample embeddings are compressed by pair aaaa, prompt embeddings are raw"),
                                     (None, "bbbb", "sample embeddings are raw, prompt embeddings are compressed by pair bbbb"),
                                     ("aaaa", "bbbb", "pair aaaa, prompt embeddings are compressed by pair bbbb")]:
        with pytest.raises(ValidationError, match=message):
            score_zero_shot(samples, prompts, protocol, ZeroShotConfig(), OverlapScoringConfig(), 0,
                            sample_pair=pair_s, prompt_pair=pair_p)


def test_sample_embeddings_are_reused_after_a_prompt_edit(tmp_path):
    cache = CacheConfig(enabled=True, cache_dir=tmp_path)
    run = lambda zs: ZeroShotBenchmark(zs, [_extractor(cache_identity="toy-v1")], sample_branch="query",  # noqa: E731
                                       text_branch="gallery", cache_config=cache).run().candidate_results[0]
    first = run(_zero_shot())
    assert first.embedding_metadata["cache_status"] == {"samples": "miss", "prompts": "miss"}
    edited = run(_zero_shot({"alpha": ["an alpha"], "beta": "a beta", "gamma": "a gamma"}))
    assert edited.embedding_metadata["cache_status"] == {"samples": "hit", "prompts": "miss"}
    assert edited.embedding_metadata["sample_fingerprint"] == first.embedding_metadata["sample_fingerprint"]
    assert edited.embedding_metadata["prompt_fingerprint"] != first.embedding_metadata["prompt_fingerprint"]
    again = run(_zero_shot())
    assert again.embedding_metadata["cache_status"] == {"samples": "hit", "prompts": "hit"}
    assert again.zero_shot == first.zero_shot


def test_unsafe_callables_skip_the_cache_with_a_warning(tmp_path):
    with pytest.warns(VertebraeWarning, match="not an importable top-level function"):
        unsafe = CallableRetrievalExtractor("lam", lambda rows: encode_samples(rows), encode_texts)
    result = ZeroShotBenchmark(_zero_shot(), [unsafe], sample_branch="query", text_branch="gallery",
                               cache_config=CacheConfig(enabled=True, cache_dir=tmp_path)).run().candidate_results[0]
    assert result.embedding_metadata["cache_status"] == {"samples": "bypassed_unsafe_identity",
                                                        "prompts": "bypassed_unsafe_identity"}
    assert result.embedding_metadata["cache_eligible"] is False
    assert not (tmp_path / "zero_shot").exists()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        named = CallableRetrievalExtractor("named", encode_samples, encode_texts)  # importable: cached, no warning
    assert named.reusable and named.recipe()["paths"]["query_fn"].endswith(":encode_samples")


def test_memory_config_bounds_endpoint_materialisation():
    with pytest.raises(BudgetError, match="endpoint 'samples'.*max_resident_bytes=1000"):
        ZeroShotBenchmark(_zero_shot(), [_extractor()], sample_branch="query", text_branch="gallery",
                          memory_config=MemoryConfig(max_resident_bytes=1000),
                          embedding_config=EmbeddingConfig(batch_size=8)).run()
    spilled = ZeroShotBenchmark(_zero_shot(), [_extractor()], sample_branch="query", text_branch="gallery",
                                memory_config=MemoryConfig(max_resident_bytes=1000, allow_disk_spill=True),
                                embedding_config=EmbeddingConfig(batch_size=8)).run()
    plain = ZeroShotBenchmark(_zero_shot(), [_extractor()], sample_branch="query", text_branch="gallery").run()
    assert spilled.candidate_results[0].zero_shot == plain.candidate_results[0].zero_shot


def test_main_module_functions_need_a_cache_identity(tmp_path):
    def script_encoder(rows):
        return encode_samples(rows)

    script_encoder.__module__, script_encoder.__qualname__ = "__main__", "script_encoder"
    with pytest.warns(VertebraeWarning, match="query_fn is not an importable top-level function"):
        unsafe = CallableRetrievalExtractor("script", script_encoder, encode_texts)
    declared = CallableRetrievalExtractor("script", script_encoder, encode_texts, cache_identity="script-v1")
    cache = CacheConfig(enabled=True, cache_dir=tmp_path)
    statuses = [ZeroShotBenchmark(_zero_shot(), [e], sample_branch="query", text_branch="gallery", cache_config=cache)
                .run().candidate_results[0].embedding_metadata["cache_status"]["samples"] for e in (unsafe, declared, declared)]
    assert statuses == ["bypassed_unsafe_identity", "miss", "hit"]


def _keyword_vectors(rows):
    return np.stack([[row.count(word) + 0.01 * len(row) for word in ("ball", "oven", "rain")] for row in rows])


def test_a_branch_less_text_encoder_scores_text_samples_and_shares_the_labelled_sample_key():
    from vertebrae.core.fingerprint import fingerprint
    from vertebrae.core.inputs import RawInputs
    from vertebrae.extractors.base import Extractor
    from vertebrae.stages.common import embedding_recipe
    from vertebrae.stages.zero_shot import sample_embedding_recipe

    class Keywords(Extractor):
        branch_modality = {None: "text"}

        def __init__(self):
            self.name = "keywords"

        def recipe(self):
            return {"type": "keywords", "version": 1}

        def transform(self, inputs, *, branch=None):
            return _keyword_vectors(list(inputs))

    texts = ["the ball flew", "kick the ball", "preheat the oven", "the oven is hot", "rain again", "heavy rain",
             "a ball and rain"]
    labels = ["sport", "sport", "cooking", "cooking", "weather", "weather", "weather"]
    dataset = BenchmarkDataset.from_arrays(RawInputs.texts(texts), labels, identity=DatasetIdentity.declared("tiny-text", "1"))
    zs = ZeroShotDataset.from_dataset(dataset, {"sport": "a ball game", "cooking": "an oven recipe", "weather": "rain"})
    result = ZeroShotBenchmark(zs, [Keywords()]).run().candidate_results[0]
    # classes in catalog order: cooking, sport, weather; "a ball and rain" is closer to the sport prototype
    assert result.zero_shot.class_keys == ["cooking", "sport", "weather"]
    assert result.zero_shot.confusion_matrix == [[2, 0, 0], [0, 2, 0], [0, 1, 2]]
    assert result.embedding_metadata["sample_branch"] is None
    with pytest.raises(ValidationError, match="branch-less text encoder: sample_branch and text_branch must be None"):
        ZeroShotCandidate(Keywords(), "text", "text")
    labelled = fingerprint("embedding", embedding_recipe(dataset.identity_key(), "samples", Keywords()))
    # the same rows through the same transform: one artifact for both protocols (a branch makes it distinct)
    assert fingerprint("embedding", sample_embedding_recipe(dataset.identity_key(), Keywords(), None)) == labelled
    assert result.embedding_metadata["sample_fingerprint"] == labelled


# --------------------------------------------------------------------------------------------------
# collapsed embeddings (issue 15, item 1)


def _constant(rows):
    return np.ones((len(rows), CENTERS.shape[1]))


def test_constant_samples_or_prompts_are_flagged_and_never_ranked():
    from vertebrae.reports.markdown import render_zero_shot_markdown
    from vertebrae.scoring.degenerate import DegenerateEmbeddingWarning

    zs = _zero_shot()
    candidates = [CallableRetrievalExtractor("constant_samples", _constant, encode_texts),
                  CallableRetrievalExtractor("constant_prompts", encode_samples, _constant), _extractor("real")]
    with pytest.warns(DegenerateEmbeddingWarning):
        result = ZeroShotBenchmark(zs, candidates, sample_branch="query", text_branch="gallery").run()
    samples, prompts, real = result.candidate_results
    # constant samples all get one prediction; constant prompts make every class tie, so the first class wins
    assert len({tuple(row) for row in np.asarray(samples.zero_shot.confusion_matrix).T.tolist() if any(row)}) == 1
    assert prompts.zero_shot.n_top_score_ties == 75
    assert samples.zero_shot.metadata["degenerate"][0]["what"] == "Sample embeddings (L2-normalised)"
    assert not samples.overlap.aggregate_valid  # the OverlapIndex beside it is flagged too
    assert prompts.zero_shot.metadata["degenerate"][0]["what"] == "Class prototypes"
    assert prompts.zero_shot.metadata["degenerate"][0]["reason"].startswith("all 3 rows are one point")
    assert prompts.overlap.aggregate_valid  # its sample embeddings are real
    assert not samples.aggregate_valid and not prompts.aggregate_valid and real.aggregate_valid
    assert "degenerate" not in real.zero_shot.metadata and "degeneracy" not in real.overlap.to_dict()
    assert [r.name for r in result.ranked_results()] == ["real"] and result.quality_cohort() == ["real"]
    assert [row["rank"] for row in result.table_rows()] == [1, None, None]
    doc = result.to_dict()
    assert doc["ranking"] == ["real"] and type(result).from_dict(doc).to_dict() == doc
    text = render_zero_shot_markdown(result)
    assert "Not ranked: **constant_samples**: Sample embeddings (L2-normalised): all 75 rows are one point" in text
    assert "Not ranked: **constant_prompts**: Class prototypes: all 3 rows are one point" in text
    assert "- **constant_prompts**: degenerate-embedding: Class prototypes" in text
