"""TimmExtractor on a tiny timm ViT built offline: embeddings equal a direct forward_features /
forward_head(pre_logits=True) on the same preprocessed images (the model's own data config); pooling and hidden
layers; bad declarations refused when the extractor is built, naming the key."""

from __future__ import annotations

import numpy as np
import pytest

from vertebrae.core.errors import ConfigError
from vertebrae.extractors.registry import build_extractor
from vertebrae.extractors.timm_models import TimmExtractor

ARCH = "vit_tiny_patch16_224"


@pytest.fixture(scope="module")
def timm_folder(tmp_path_factory):
    import tiny_models

    return tiny_models.build_timm(tmp_path_factory.mktemp("timm") / "timm_vit")


@pytest.fixture(scope="module")
def images(timm_folder):
    import tiny_models

    return tiny_models.write_images(timm_folder.parent / "images", 12)


def reference(folder, images, fn, data_overrides=None):
    """The hand-written oracle: timm's own model, data config and eval transform, run directly."""
    import timm
    import torch
    from PIL import Image

    model = timm.create_model(f"local-dir:{folder}", pretrained=True).eval()
    config = {**timm.data.resolve_model_data_config(model), **(data_overrides or {})}
    transform = timm.data.create_transform(**config, is_training=False)
    x = torch.stack([transform(Image.open(p).convert("RGB")) for p in images])
    with torch.inference_mode():
        return fn(model, x).numpy()


def test_pre_logits_equal_a_direct_forward(timm_folder, images):
    import tiny_models

    expected = reference(timm_folder, images, lambda m, x: m.forward_head(m.forward_features(x), pre_logits=True))
    from_folder = TimmExtractor("t", checkpoint=str(timm_folder), device="cpu", batch_size=5)
    assert from_folder.data_config["input_size"] == (3, 32, 32)  # the folder's own data config
    np.testing.assert_array_equal(from_folder.transform([str(p) for p in images]), expected)
    # a bare weights file into the named architecture (model_args), the data config's input size overridden
    from_file = build_extractor("t", {"type": "timm", "model": ARCH, "checkpoint": str(timm_folder) + ".safetensors",
                                      "model_args": tiny_models.TIMM_ARGS, "preprocess": {"input_size": [3, 32, 32]},
                                      "device": "cpu", "batch_size": 4}, where="x")
    np.testing.assert_array_equal(from_file.transform([str(p) for p in images]), expected)
    recipe = from_file.recipe()
    assert recipe["weights"]["sha256"] and recipe["pooling"] == "pre_logits" and recipe["timm_version"]
    assert "model.safetensors" in from_folder.recipe()["weights"]["files"]


@pytest.mark.parametrize("kwargs, fn", [
    ({"pooling": "cls"}, lambda m, x: m.forward_features(x)[:, 0]),
    ({"pooling": "tokens_mean"}, lambda m, x: m.forward_features(x)[:, m.num_prefix_tokens:].mean(dim=1)),
    ({"hidden_layer": 1}, lambda m, x: m.blocks[:2](m.norm_pre(m._pos_embed(m.patch_embed(x))))[:, 1:].mean(dim=1)),
    ({"hidden_layer": -1, "pooling": "cls"}, lambda m, x: m.blocks(m.norm_pre(m._pos_embed(m.patch_embed(x))))[:, 0]),
])
def test_pooling_and_hidden_layers(timm_folder, images, kwargs, fn):
    out = TimmExtractor("t", checkpoint=str(timm_folder), device="cpu", **kwargs).transform([str(p) for p in images])
    np.testing.assert_allclose(out, reference(timm_folder, images, fn), rtol=1e-5, atol=1e-6)


def test_bad_declarations_are_refused_naming_the_key(timm_folder):
    import tiny_models

    weights = str(timm_folder) + ".safetensors"
    with pytest.raises(ConfigError, match=r"x\.model: 'vit_tiny_patch16_2244' is not a timm model .*closest timm "
                                          r"names: vit_tiny_patch16_224"):
        build_extractor("t", {"type": "timm", "model": "vit_tiny_patch16_2244", "pretrained": True}, where="x")
    with pytest.raises(ConfigError, match=r"x\.checkpoint: .* does not fit vit_tiny_patch16_224: .*of another shape"):
        build_extractor("t", {"type": "timm", "model": ARCH, "checkpoint": weights,
                              "model_args": {**tiny_models.TIMM_ARGS, "embed_dim": 48, "num_heads": 3}}, where="x")
    with pytest.raises(ConfigError, match=r"x\.checkpoint: .* does not fit .*missing"):
        build_extractor("t", {"type": "timm", "model": ARCH, "checkpoint": weights,
                              "model_args": {**tiny_models.TIMM_ARGS, "depth": 4}}, where="x")
    with pytest.raises(ConfigError, match=r"x\.hidden_layer: 3 is beyond the depth of vit_tiny_patch16_224 \(3 layers"):
        build_extractor("t", {"type": "timm", "checkpoint": str(timm_folder), "hidden_layer": 3}, where="x")
    with pytest.raises(ConfigError, match=r"x: pretrained: false without a checkpoint"):
        build_extractor("t", {"type": "timm", "model": ARCH}, where="x")
    with pytest.raises(ConfigError, match=r"x\.pooling: cls needs a model with a class token"):
        build_extractor("t", {"type": "timm", "model": "resnet18", "pretrained": True, "pooling": "cls"}, where="x")
