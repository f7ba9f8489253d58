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
    # vertebrae's layer numbering: 0 = the input of block 1, i = the output of block i, -1 = forward_features
    ({"hidden_layer": 0}, lambda m, x: m.norm_pre(m._pos_embed(m.patch_embed(x)))[:, 1:].mean(dim=1)),
    ({"hidden_layer": 1}, lambda m, x: m.blocks[:1](m.norm_pre(m._pos_embed(m.patch_embed(x))))[:, 1:].mean(dim=1)),
    ({"hidden_layer": 3, "pooling": "cls"}, lambda m, x: m.blocks(m.norm_pre(m._pos_embed(m.patch_embed(x))))[:, 0]),
    ({"hidden_layer": -2, "pooling": "cls"}, lambda m, x: m.blocks[:2](m.norm_pre(m._pos_embed(m.patch_embed(x))))[:, 0]),
    ({"hidden_layer": -1, "pooling": "cls"}, lambda m, x: m.norm(m.blocks(m.norm_pre(m._pos_embed(m.patch_embed(x)))))[:, 0]),
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
    with pytest.raises(ConfigError, match=r"x\.hidden_layer: 4 is beyond the depth of vit_tiny_patch16_224 \(3 blocks; "
                                          r"valid layers -3\.\.3: 0 = the embeddings"):
        build_extractor("t", {"type": "timm", "checkpoint": str(timm_folder), "hidden_layer": 4}, where="x")
    with pytest.raises(ConfigError, match=r"x\.hidden_layer: -4 is beyond the depth of vit_tiny_patch16_224 \(3 blocks"):
        build_extractor("t", {"type": "timm", "checkpoint": str(timm_folder), "hidden_layer": -4}, where="x")
    with pytest.raises(ConfigError, match=r"x: pretrained: false without a checkpoint"):
        build_extractor("t", {"type": "timm", "model": ARCH}, where="x")
    with pytest.raises(ConfigError, match=r"x\.pooling: cls needs a model with a class token"):
        build_extractor("t", {"type": "timm", "model": "resnet18", "pretrained": True, "pooling": "cls"}, where="x")


RECALL = """
import json, sys
from vertebrae.core.check_records import remembered_in
from vertebrae.extractors.registry import build_extractor
with remembered_in(sys.argv[1]):
    extractor = build_extractor("t", json.loads(sys.argv[2]), where="x")
    out = {"recipe": extractor.recipe(), "timm_imported": "timm" in sys.modules or "torch" in sys.modules}
print(json.dumps(out))
"""


def test_a_remembered_meta_check_is_recalled_without_timm_and_gives_the_same_recipe(timm_folder, tmp_path):
    """Inside ``remembered_in`` (the workflow's planning and plan jobs) a later process recalls what the meta model
    told and imports neither timm nor torch; the recipe is the full check's. Declaration-level refusals still run
    on the recalled findings, and other checkpoint bytes are checked in full."""
    import json
    import shutil
    import subprocess
    import sys

    import tiny_models

    from vertebrae.core.check_records import remembered_in

    records = tmp_path / "checks"
    folder = shutil.copytree(timm_folder, tmp_path / "vit")
    decl = {"type": "timm", "checkpoint": str(folder), "hidden_layer": 1, "device": "cpu"}

    def build(declaration):
        done = subprocess.run([sys.executable, "-c", RECALL, str(records), json.dumps(declaration)],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout)

    full = build_extractor("t", decl, where="x").recipe()  # outside the block: nothing recorded
    assert not records.exists()
    first, second = build(decl), build(decl)
    assert first["timm_imported"] and not second["timm_imported"]
    assert first["recipe"] == second["recipe"] == json.loads(json.dumps(full))
    with remembered_in(records):  # the record holds the depth: a layer beyond it is still refused
        with pytest.raises(ConfigError, match=r"x\.hidden_layer: 4 is beyond the depth of vit_tiny_patch16_224"):
            build_extractor("t", {**decl, "hidden_layer": 4}, where="x")
        # new weights under the same path (another architecture's shapes): checked in full, refused
        other = tiny_models.build_timm(tmp_path / "wide", seed=1)
        config = json.loads((other / "config.json").read_text())
        config["model_args"] = {**config.get("model_args", {}), "embed_dim": 48, "num_heads": 3}
        (folder / "config.json").write_text(json.dumps(config))
        with pytest.raises(ConfigError, match=r"x\.checkpoint: .* does not fit vit_tiny_patch16_224"):
            build_extractor("t", decl, where="x")


def test_a_channels_last_swin_is_pooled_over_its_spatial_axes(tmp_path, images):
    """A Swin's forward_features is an NHWC map: tokens_mean is its spatial mean, the very features its own head
    pools (``forward_head(pre_logits=True)``), one value per channel (cls is refused: no class token)."""
    import timm
    import torch
    from safetensors.torch import save_file

    args = {"img_size": 32, "patch_size": 4, "window_size": 4, "embed_dim": 16, "depths": [1, 1], "num_heads": [1, 1],
            "num_classes": 0}
    torch.manual_seed(0)
    model = timm.create_model("swin_tiny_patch4_window7_224", pretrained=False, **args).eval()
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(tmp_path / "swin.safetensors"))
    decl = {"type": "timm", "model": "swin_tiny_patch4_window7_224", "checkpoint": str(tmp_path / "swin.safetensors"),
            "model_args": args, "preprocess": {"input_size": [3, 32, 32]}, "device": "cpu"}
    pre_logits = build_extractor("s", decl, where="x").transform([str(p) for p in images])
    extractor = build_extractor("s", {**decl, "pooling": "tokens_mean"}, where="x")
    out = extractor.transform([str(p) for p in images])
    assert out.shape == (len(images), 32)  # the channels, not height x channels
    np.testing.assert_allclose(out, pre_logits, rtol=1e-5, atol=1e-6)
    assert extractor.recipe()["final_pooling"] == "vertebrae.timm_final_pooling/v2"
    assert "final_pooling" not in build_extractor("s", decl, where="x").recipe()  # pre_logits: unchanged
