"""One layer numbering for every adapter with ``hidden_layer`` (``vertebrae.extractors.layers``): 0 = the embeddings
(the input of block 1), i = the output of block i, -1 = the model's final features (after its final norm), -i counted
from the end on the blocks.

The oracle: a tiny timm ViT and a transformers ViTModel holding the very same weights (3 blocks each; the timm
tensors copied into the HF layout, so both models compute the same function to the last bit). For every layer, each
adapter's embeddings equal the state computed by hand by running that model's own modules block by block, and the
two adapters give the same rows: layer i names the same block in both. The docs' ``hidden_layers`` example is
planned for every family the docs name it for, on a 12-block model of each, and a layer beyond the depth is refused
naming the key, the block count and the valid range."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from vertebrae.core.errors import ConfigError
from vertebrae.extractors.layers import NUMBERING
from vertebrae.extractors.registry import build_extractor

ROOT = Path(__file__).resolve().parents[2]
DEPTH = 3
LAYERS = [0, 1, 2, DEPTH, -1, -2, -DEPTH]  # embeddings, first, middle, last block, final features, from the end


def _hf_vit_from_timm(timm_model, folder: Path) -> Path:
    """A transformers ViTModel with the timm ViT's weights (same width, depth, heads, MLP and LayerNorm eps)."""
    import torch
    from transformers import ViTConfig, ViTImageProcessor, ViTModel

    sd = timm_model.state_dict()
    width = sd["cls_token"].shape[-1]
    config = ViTConfig(image_size=32, patch_size=8, hidden_size=width, intermediate_size=sd["blocks.0.mlp.fc1.weight"].shape[0],
                       num_hidden_layers=len(timm_model.blocks), num_attention_heads=timm_model.blocks[0].attn.num_heads,
                       layer_norm_eps=timm_model.norm.eps, hidden_act="gelu", qkv_bias=True)
    hf = ViTModel(config)
    new = {"embeddings.cls_token": sd["cls_token"], "embeddings.position_embeddings": sd["pos_embed"],
           "embeddings.patch_embeddings.projection.weight": sd["patch_embed.proj.weight"],
           "embeddings.patch_embeddings.projection.bias": sd["patch_embed.proj.bias"],
           "layernorm.weight": sd["norm.weight"], "layernorm.bias": sd["norm.bias"]}
    names = {"attn.proj": "attention.o_proj", "norm1": "layernorm_before", "norm2": "layernorm_after",
             "mlp.fc1": "mlp.fc1", "mlp.fc2": "mlp.fc2"}
    for i in range(len(timm_model.blocks)):
        for part in ("weight", "bias"):
            q, k, v = sd[f"blocks.{i}.attn.qkv.{part}"].chunk(3)
            new.update({f"layers.{i}.attention.q_proj.{part}": q, f"layers.{i}.attention.k_proj.{part}": k,
                        f"layers.{i}.attention.v_proj.{part}": v})
            new.update({f"layers.{i}.{hf_name}.{part}": sd[f"blocks.{i}.{timm_name}.{part}"]
                        for timm_name, hf_name in names.items()})
    missing, unexpected = hf.load_state_dict(new, strict=False)
    assert not unexpected and all(key.startswith("pooler.") for key in missing)
    with torch.no_grad():  # the pooler is not used by any layer; seeded so the folder's bytes are fixed
        torch.manual_seed(0)
        hf.pooler.dense.weight.normal_()
        hf.pooler.dense.bias.zero_()
    hf.save_pretrained(folder)
    # the timm model's preprocessing on 32 x 32 images: no resize, (x / 255 - 0.5) / 0.5
    ViTImageProcessor(size={"height": 32, "width": 32}, do_resize=False, image_mean=[0.5] * 3,
                      image_std=[0.5] * 3).save_pretrained(folder)
    return folder


def _square_images(folder: Path, n: int = 5) -> list[str]:
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(3)
    paths = []
    for i in range(n):
        path = folder / f"sq_{i}.png"
        Image.fromarray(rng.integers(0, 256, size=(32, 32, 3), dtype=np.uint8)).save(path)
        paths.append(str(path))
    return paths


@pytest.fixture(scope="module")
def twins(tmp_path_factory):
    """The tiny timm ViT (tests/tiny_models.py) and an HF ViT with its weights, both loaded for hand oracles."""
    import timm
    import tiny_models
    from transformers import ViTModel

    root = tmp_path_factory.mktemp("twins")
    timm_folder = tiny_models.build_timm(root / "timm")
    timm_model = timm.create_model(f"local-dir:{timm_folder}", pretrained=True).eval()
    assert len(timm_model.blocks) == DEPTH
    hf_folder = _hf_vit_from_timm(timm_model, root / "hf")
    return {"timm": timm_folder, "hf": hf_folder, "timm_model": timm_model,
            "hf_model": ViTModel.from_pretrained(hf_folder).eval(), "images": _square_images(root / "images")}


def _pixels(twins):
    """The images as both models see them (timm's own eval transform; the HF processor gives the same tensor)."""
    import timm
    import torch
    from PIL import Image

    config = {**timm.data.resolve_model_data_config(twins["timm_model"]), "crop_pct": 1.0}
    transform = timm.data.create_transform(**config, is_training=False)
    return torch.stack([transform(Image.open(p).convert("RGB")) for p in twins["images"]])


def _timm_by_hand(model, x, layer):
    """Token states of ``layer`` by running the timm model's own modules block by block."""
    hidden = model.norm_pre(model.patch_drop(model._pos_embed(model.patch_embed(x))))
    blocks = len(model.blocks)
    stop = blocks if layer == -1 else (layer if layer >= 0 else blocks + 1 + layer)
    for block in model.blocks[:stop]:
        hidden = block(hidden)
    return model.norm(hidden) if layer == -1 else hidden


def _hf_by_hand(model, x, layer):
    """Token states of ``layer`` by running the transformers ViT's own modules block by block."""
    hidden = model.embeddings(x)
    blocks = len(model.layers)
    stop = blocks if layer == -1 else (layer if layer >= 0 else blocks + 1 + layer)
    for block in model.layers[:stop]:
        hidden = block(hidden)
    return model.layernorm(hidden) if layer == -1 else hidden


def _decls(twins, pooling):
    timm_pooling = {"cls": "cls", "mean": "tokens_mean"}[pooling]
    return ({"type": "timm", "checkpoint": str(twins["timm"]), "preprocess": {"crop_pct": 1.0}, "pooling": timm_pooling,
             "device": "cpu", "batch_size": 2},
            {"type": "hf_vision", "model": str(twins["hf"]), "pooling": pooling, "device": "cpu", "batch_size": 2})


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_layer_i_of_a_timm_vit_and_an_hf_vit_name_the_same_block(twins, pooling):
    import torch
    from PIL import Image

    x = _pixels(twins)
    timm_decl, hf_decl = _decls(twins, pooling)
    timm_sweep = build_extractor("t", {**timm_decl, "hidden_layer": 0}, where="x")
    hf_sweep = build_extractor("h", {**hf_decl, "hidden_layer": 0}, where="x")
    timm_rows = timm_sweep.transform_layers(twins["images"], LAYERS)
    hf_rows = hf_sweep.transform_layers(twins["images"], LAYERS)
    with torch.inference_mode():
        hf_pixels = hf_sweep.loaded().processor(images=[Image.open(p).convert("RGB") for p in twins["images"]],
                                                return_tensors="pt")["pixel_values"]
        np.testing.assert_allclose(hf_pixels.numpy(), x.numpy(), atol=1e-6)  # one input tensor for both models
        for layer in LAYERS:
            timm_state = _timm_by_hand(twins["timm_model"], x, layer)
            hf_state = _hf_by_hand(twins["hf_model"], x, layer)
            np.testing.assert_allclose(timm_state.numpy(), hf_state.numpy(), atol=1e-5)  # the twins are one model
            # timm's tokens_mean leaves the class token out; hf_vision's mean pools every token
            timm_expected = timm_state[:, 0] if pooling == "cls" else timm_state[:, 1:].mean(dim=1)
            hf_expected = hf_state[:, 0] if pooling == "cls" else hf_state.mean(dim=1)
            np.testing.assert_allclose(timm_rows[layer], timm_expected.numpy(), atol=1e-5, err_msg=f"timm layer {layer}")
            np.testing.assert_allclose(hf_rows[layer], hf_expected.numpy(), atol=1e-5, err_msg=f"hf layer {layer}")
            if pooling == "cls":  # the same token of the same block: the two adapters agree
                np.testing.assert_allclose(timm_rows[layer], hf_rows[layer], atol=1e-5, err_msg=f"layer {layer}")


def test_minus_one_is_the_models_final_normed_features(twins):
    """-1 is what the model's own forward gives (timm forward_features, HF last_hidden_state: after the final
    norm), the rows of the same candidate without a hidden layer; the last block's output (layer 3) is before it."""
    import torch

    x = _pixels(twins)
    timm_decl, hf_decl = _decls(twins, "cls")
    with torch.inference_mode():
        final_timm = twins["timm_model"].forward_features(x)[:, 0].numpy()
        final_hf = twins["hf_model"](pixel_values=x).last_hidden_state[:, 0].numpy()
    for decl, final in ((timm_decl, final_timm), (hf_decl, final_hf)):
        minus_one = build_extractor("m", {**decl, "hidden_layer": -1}, where="x").transform(twins["images"])
        np.testing.assert_allclose(minus_one, final, atol=1e-5)
        np.testing.assert_array_equal(minus_one, build_extractor("m", decl, where="x").transform(twins["images"]))
        last_block = build_extractor("m", {**decl, "hidden_layer": DEPTH}, where="x").transform(twins["images"])
        assert not np.allclose(last_block, minus_one, atol=1e-3)  # the final norm lies between them


def test_recipes_with_a_hidden_layer_name_the_numbering(twins):
    """A hidden layer's meaning changed (timm: i was block i + 1; -1 was before the final norm): the recipe of a
    candidate with one records the numbering, so no embedding cached under the old meaning is reused; a candidate
    without one keeps its recipe."""
    assert NUMBERING == "vertebrae.layers/v2"
    for decl in _decls(twins, "cls"):
        with_layer = build_extractor("m", {**decl, "hidden_layer": 2}, where="x").recipe()
        assert with_layer["hidden_layer"] == 2 and with_layer["layer_numbering"] == NUMBERING
        assert "layer_numbering" not in build_extractor("m", decl, where="x").recipe()


# --------------------------------------------------------------------------- the docs' example, every family


def _docs_sweep() -> tuple[list[int], list[str]]:
    """The layer sweep example of docs/models.md and the extractor types it names."""
    text = (ROOT / "docs" / "models.md").read_text(encoding="utf-8")
    found = re.search(r"`hidden_layers: (\[[-\d, ]+\])` on (?:an? )?((?:`\w+`(?:, | or | and )?)+) extractor", text)
    assert found, "docs/models.md: no `hidden_layers: [...]` on `TYPE`, ... extractor example"
    layers = [int(v) for v in found.group(1).strip("[]").split(",")]
    return layers, re.findall(r"`(\w+)`", found.group(2))


def _twelve_block_models(root: Path) -> dict[str, dict]:
    """A 12-block model of each family, declared offline: timm's vit_base (checked on the meta device, nothing
    downloaded), and transformers folders whose config.json says 12 layers (what planning reads)."""
    import json

    folders = {}
    for kind, config in (("hf_vision", {"architectures": ["ViTModel"], "model_type": "vit"}),
                         ("hf_text", {"architectures": ["BertModel"], "model_type": "bert"})):
        folder = root / kind
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 12, "hidden_size": 32}))
        folders[kind] = {"type": kind, "model": str(folder)}
    return {"timm": {"type": "timm", "model": "vit_base_patch16_224", "pretrained": True}, **folders}


def test_the_docs_layer_sweep_plans_for_every_family_it_names(tmp_path, monkeypatch):
    from vertebrae.planning import plan

    layers, families = _docs_sweep()
    assert families and set(families) <= {"timm", "hf_vision", "hf_text"}, families
    models = _twelve_block_models(tmp_path / "models")
    images = [Path(p).name for p in _square_images(tmp_path, 4)]
    (tmp_path / "images.csv").write_text("image,label,id\n" + "".join(f"{p},{'ab'[i % 2]},r{i}\n" for i, p in enumerate(images)))
    (tmp_path / "texts.csv").write_text("text,label,id\n" + "".join(f"text {i},{'ab'[i % 2]},r{i}\n" for i in range(4)))
    monkeypatch.chdir(tmp_path)

    def config(kind, decl):
        column = "text_column" if kind == "hf_text" else "image_column"
        source = {"type": "manifest", "path": "texts.csv" if kind == "hf_text" else "images.csv", column: column[:-7],
                  "id_column": "id"}
        return {"benchmarks": {"b": {"dataset": {"source": source, "identity": {"kind": "declared", "revision": "1",
                                                                                "name": "d"}},
                                     "extractors": {"m": decl}, "scoring": {"k": 2, "min_samples_per_cluster": 2}}}}

    for kind in families:
        result = plan(config(kind, {**models[kind], "hidden_layers": layers}))
        names = [c["name"] for c in result.spec(result.reports["b"])["candidates"]]
        assert names == [f"m@{layer}" for layer in layers], (kind, names)
        with pytest.raises(ConfigError, match=r"benchmarks\.b\.extractors\.m@13\.hidden_layer: 13 is beyond the depth "
                                              r"of .* \(12 blocks; valid layers -12\.\.12: 0 = the embeddings"):
            plan(config(kind, {**models[kind], "hidden_layers": [*layers, 13]}))
