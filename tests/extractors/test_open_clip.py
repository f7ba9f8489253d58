"""OpenCLIPExtractor on tiny open_clip CLIP and SigLIP-style models saved to folders (local-dir:, the hub code path).

Reference: the model rebuilt by hand from its config and safetensors, images preprocessed with PIL + numpy
(resize shortest side, centre crop, normalise), texts tokenised by open_clip's BPE tokenizer, L2 norm by hand.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch
from PIL import Image

from vertebrae.core.errors import ConfigError, ValidationError
from vertebrae.core.fingerprint import fingerprint
from vertebrae.core.inputs import RawInputs
from vertebrae.extractors.open_clip import OpenCLIPExtractor
from vertebrae.extractors.registry import build_extractor
from vertebrae.stages.common import embed_endpoint, embedding_recipe

TEXTS = ["a photo of a cat", "a diagram of a chip", "rain over the harbour", "a quiet violin", "x", "two dogs"]


def reference_model(folder):
    import open_clip
    from safetensors.torch import load_file

    cfg = json.loads((folder / "open_clip_config.json").read_text())["model_cfg"]
    cls = open_clip.CustomTextCLIP if cfg.get("custom_text") else open_clip.CLIP
    model = cls(**{k: v for k, v in cfg.items() if k != "custom_text"})
    model.load_state_dict(load_file(str(folder / "open_clip_model.safetensors")))
    return model.eval()


def reference_pixels(path, size=32, mean=(0.48145466, 0.4578275, 0.40821073), std=(0.26862954, 0.26130258, 0.27577711)):
    image = Image.open(path).convert("RGB")
    w, h = image.size
    nw, nh = (size, int(size * h / w)) if w <= h else (int(size * w / h), size)
    image = image.resize((nw, nh), Image.BICUBIC)
    left, top = int(round((nw - size) / 2.0)), int(round((nh - size) / 2.0))
    x = np.asarray(image.crop((left, top, left + size, top + size)), dtype=np.float32) / 255.0
    x = (x - np.asarray(mean, np.float32)) / np.asarray(std, np.float32)
    return torch.from_numpy(x.transpose(2, 0, 1).copy())


def reference_embeddings(folder, images, texts):
    from open_clip.tokenizer import SimpleTokenizer

    model = reference_model(folder)
    with torch.no_grad():
        img = model.encode_image(torch.stack([reference_pixels(p) for p in images])).numpy()
        txt = model.encode_text(SimpleTokenizer()(texts)).numpy()
    return img / np.linalg.norm(img, axis=1, keepdims=True), txt / np.linalg.norm(txt, axis=1, keepdims=True)


@pytest.mark.parametrize("which", ["oc_clip", "oc_siglip"])
def test_embeddings_equal_reference_sharded_and_unsharded(tiny, which):
    folder = getattr(tiny, which)
    ref_img, ref_txt = reference_embeddings(folder, tiny.images, TEXTS)
    extractor = build_extractor("oc", {"type": "open_clip", "model": f"local-dir:{folder}", "batch_size": 5}, where="x")
    images = RawInputs.images([str(p) for p in tiny.images], [f"img-{i}" for i in range(len(tiny.images))])
    ids = tuple(images.ids)
    whole = embed_endpoint(extractor, images, ids, shards=1, batch_size=100, endpoint="samples").matrix
    sharded = embed_endpoint(extractor, images, ids, shards=3, batch_size=2, endpoint="samples").matrix
    np.testing.assert_allclose(whole, ref_img, atol=1e-5)
    np.testing.assert_allclose(sharded, ref_img, atol=1e-5)
    texts = RawInputs.texts(TEXTS)
    for shards in (1, 4):
        out = embed_endpoint(extractor, texts, tuple(texts.ids), shards=shards, batch_size=3, endpoint="prompts",
                             branch="text_branch").matrix
        np.testing.assert_allclose(out, ref_txt, atol=1e-5)
    assert whole.dtype == np.float32 and whole.shape == (12, 16)


def test_workers_decode_images_in_order(tiny):
    extractor = OpenCLIPExtractor("oc", f"local-dir:{tiny.oc_clip}", batch_size=4, num_workers=2)
    out = extractor.transform(RawInputs.images([str(p) for p in tiny.images]))
    np.testing.assert_allclose(out, reference_embeddings(tiny.oc_clip, tiny.images, TEXTS[:1])[0], atol=1e-5)


def test_eval_mode_is_restored_and_inference_mode_used(tiny):
    extractor = OpenCLIPExtractor("oc", f"local-dir:{tiny.oc_clip}")
    module = extractor.loaded().module
    module.train()
    seen = {}
    handle = module.visual.register_forward_hook(
        lambda m, i, o: seen.update(training=m.training, inference=torch.is_inference_mode_enabled()))
    extractor.transform([str(tiny.images[0])])
    handle.remove()
    assert seen == {"training": False, "inference": True}
    assert module.training and all(m.training for m in module.modules())


def test_recipe_pins_weights_and_preprocessing_not_the_path(tiny, tmp_path):
    def recipe(folder, **kw):
        return fingerprint("embedding", embedding_recipe("declared:x@1", "samples",
                                                          OpenCLIPExtractor("oc", f"local-dir:{folder}", **kw)))

    base = recipe(tiny.oc_clip)
    copy = shutil.copytree(tiny.oc_clip, tmp_path / "elsewhere")
    assert recipe(copy) == base  # the folder's content, not its path
    assert recipe(tiny.oc_clip, normalize=False) != base
    assert recipe(tiny.oc_clip, preprocess={"image_mean": [0.5, 0.5, 0.5]}) != base
    assert recipe(tiny.oc_clip, dtype="float16") != base
    cfg = json.loads((copy / "open_clip_config.json").read_text())
    cfg["preprocess_cfg"]["interpolation"] = "bilinear"
    (copy / "open_clip_config.json").write_text(json.dumps(cfg))
    changed_preprocess = recipe(copy)
    assert changed_preprocess != base
    from safetensors.torch import load_file, save_file

    weights = load_file(str(copy / "open_clip_model.safetensors"))
    weights["text_projection"] = weights["text_projection"] + 1e-3
    save_file(weights, str(copy / "open_clip_model.safetensors"))
    assert recipe(copy) not in (base, changed_preprocess)
    assert OpenCLIPExtractor("oc", f"local-dir:{tiny.oc_clip}").recipe()["vertebrae_version"]


def test_bad_rows_and_branches_are_named(tiny, tmp_path):
    extractor = OpenCLIPExtractor("oc", f"local-dir:{tiny.oc_clip}")
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"not a png")
    with pytest.raises(ValidationError, match=r"row 'bad-1'.*cannot decode image .*broken\.png"):
        extractor.transform(RawInputs.images([str(tiny.images[0]), str(broken)], ["ok-0", "bad-1"]))
    with pytest.raises(ValidationError, match=r"row 'gone'.*image file not found: .*missing\.png"):
        extractor.transform(RawInputs.images([str(tmp_path / "missing.png")], ["gone"]))
    with pytest.raises(ValidationError, match="encodes image rows, got text rows"):
        extractor.transform(RawInputs.texts(["hello"]))
    with pytest.raises(ValidationError, match="got 'query'"):
        extractor.transform(["hello"], branch="query")
    with pytest.raises(ConfigError, match=r"x\.model: .*holds no open_clip_config\.json"):
        build_extractor("oc", {"type": "open_clip", "model": f"local-dir:{tmp_path}"}, where="x")
    with pytest.raises(ConfigError, match=r"x\.pretrained: weights file not found"):
        build_extractor("oc", {"type": "open_clip", "model": "ViT-B-32", "pretrained": "weights/none.safetensors"}, where="x")


def test_cross_modal_retrieval_through_branches(tiny):
    """Texts query images through text_branch / image_branch; the score equals one computed from the reference."""
    from vertebrae.core.identity import DatasetIdentity
    from vertebrae.data.retrieval import RetrievalDataset
    from vertebrae.protocols.retrieval import RetrievalBenchmark
    from vertebrae.scoring.retrieval import RetrievalConfig, RetrievalScorer

    captions = [f"picture number {i}" for i in range(len(tiny.images))]
    relevance = [(f"q{i}", f"g{i}", 1) for i in range(len(tiny.images))]
    dataset = RetrievalDataset.from_arrays(
        RawInputs.texts(captions), RawInputs.images([str(p) for p in tiny.images]), relevance,
        query_ids=[f"q{i}" for i in range(len(captions))], gallery_ids=[f"g{i}" for i in range(len(tiny.images))],
        query_modality="text", gallery_modality="image", identity=DatasetIdentity.declared("tiny-captions", "1"))
    extractor = OpenCLIPExtractor("oc", f"local-dir:{tiny.oc_clip}")
    result = RetrievalBenchmark(dataset, [extractor], query_branch="text_branch", gallery_branch="image_branch").run()
    ref_img, ref_txt = reference_embeddings(tiny.oc_clip, tiny.images, captions)
    expected = RetrievalScorer(RetrievalConfig()).score(ref_txt, ref_img, {i: {i: 1} for i in range(len(captions))})
    assert result.candidate_results[0].primary_score == pytest.approx(expected.score, abs=1e-6)
