"""TorchExtractor: a user's module with collate / output functions, live or built from a declared factory."""

from __future__ import annotations

import numpy as np
import pytest

from vertebrae.core.errors import ConfigError, VertebraeWarning
from vertebrae.core.fingerprint import fingerprint
from vertebrae.core.identity import DatasetIdentity
from vertebrae.core.inputs import RawInputs
from vertebrae.data.labelled import BenchmarkDataset
from vertebrae.extractors.registry import build_extractor
from vertebrae.extractors.torch_module import TorchExtractor
from vertebrae.protocols.labelled import _embed_cached
from vertebrae.core.config import CacheConfig, EmbeddingConfig
from vertebrae.stages.common import embed_endpoint, embedding_recipe
from tiny_models import char_counts, make_mlp, second_half


def reference(module, X):
    (w1, b1), (w2, b2) = [(m.weight.detach().numpy(), m.bias.detach().numpy()) for m in (module[0], module[3])]
    return np.tanh(X @ w1.T + b1) @ w2.T + b2  # dropout is inactive in eval mode


def test_live_module_equals_reference_and_restores_train_mode():
    module = make_mlp().train()
    X = np.random.default_rng(0).normal(size=(23, 8))
    extractor = TorchExtractor("mlp", module, cache_identity="mlp-v1", batch_size=4)
    ids = tuple(range(23))
    for shards, batch in ((1, 100), (4, 3)):
        out = embed_endpoint(extractor, X, ids, shards=shards, batch_size=batch, endpoint="samples").matrix
        np.testing.assert_allclose(out, reference(module, X), atol=1e-5)
    assert module.training and module[2].training


def test_text_rows_with_collate_and_output_functions():
    module = make_mlp(out=4)
    texts = ["abba", "cafe bead", "hedge", "a"]
    extractor = TorchExtractor("chars", module, collate=char_counts, output=second_half, modality="text", cache_identity="c")
    expected = reference(module, char_counts(texts).numpy())[:, 1:]
    np.testing.assert_allclose(extractor.transform(RawInputs.texts(texts)), expected, atol=1e-5)
    recipe = extractor.recipe()
    assert recipe["functions"] == {"collate": "tiny_models:char_counts", "output": "tiny_models:second_half"}


def test_live_module_without_identity_skips_the_cache(tmp_path):
    X = np.random.default_rng(1).normal(size=(30, 8))
    dataset = BenchmarkDataset.from_arrays(X, [i % 3 for i in range(30)], identity=DatasetIdentity.declared("x", "1"))
    cache = CacheConfig(enabled=True, cache_dir=tmp_path)
    with pytest.warns(VertebraeWarning, match="without cache_identity"):
        unsafe = TorchExtractor("mlp", make_mlp())
    assert not unsafe.reusable
    assert _embed_cached(unsafe, dataset, EmbeddingConfig(batch_size=8), cache)[2] == "bypassed_unsafe_identity"
    safe = TorchExtractor("mlp", make_mlp(), cache_identity="mlp-v1")
    statuses = [_embed_cached(safe, dataset, EmbeddingConfig(batch_size=8), cache)[2] for _ in range(2)]
    assert statuses == ["miss", "hit"]


def test_declared_factory_recipe_follows_weights_and_params(tmp_path):
    from safetensors.torch import save_file

    module = make_mlp()
    save_file(module.state_dict(), str(tmp_path / "w.safetensors"))
    decl = {"type": "torch", "factory": "tiny_models:make_mlp", "weights": str(tmp_path / "w.safetensors"),
            "random_state": 0, "allow_sparse": True}  # schema defaults of sklearn keys are ignored
    extractor = build_extractor("mlp", decl, where="b.e")
    assert extractor.reusable
    X = np.random.default_rng(2).normal(size=(5, 8))
    np.testing.assert_allclose(extractor.transform(X), reference(module, X), atol=1e-5)

    def fp(**changes):
        return fingerprint("embedding", embedding_recipe("declared:x@1", "samples", build_extractor("mlp", {**decl, **changes}, where="b.e")))

    base = fp()
    assert fp(params={"dropout": 0.1}) != base
    state = module.state_dict()
    state["0.bias"] = state["0.bias"] + 1
    save_file(state, str(tmp_path / "w2.safetensors"))
    assert fp(weights=str(tmp_path / "w2.safetensors")) != base
    with pytest.raises(ConfigError, match=r"b\.e\.weights: file not found"):
        build_extractor("mlp", {**decl, "weights": str(tmp_path / "none.pt")}, where="b.e")
    with pytest.raises(ConfigError, match=r"b\.e\.factory: cannot import"):
        build_extractor("mlp", {**decl, "factory": "no_module:fn"}, where="b.e")
