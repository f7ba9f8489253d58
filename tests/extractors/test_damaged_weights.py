"""Damaged model files and oversized images (issue 48). A truncated ``.safetensors`` file (a partial download) used to
fail inside safetensors, timm, open_clip or transformers with an error naming no file, at the first batch of an embed
job; its header is now checked when the extractor is built (plan time, ``vertebrae validate``) and the file named. A
truncated torch checkpoint is refused naming its key. An image PIL takes for a decompression bomb used to be a
traceback (or, up to twice PIL's limit, only a warning in the job's log); it is refused naming the row and the file."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from vertebrae.core.errors import ConfigError, ValidationError
from vertebrae.extractors.registry import build_extractor
from vertebrae.extractors.torch_runtime import load_image

ARCH = "vit_tiny_patch16_224"
TRUNCATED = "is not a readable safetensors file (truncated or corrupt?): Error while deserializing header: "


def truncate(path: Path, keep: float = 0.5) -> Path:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])
    return path


@pytest.fixture(scope="module")
def timm_folder(tmp_path_factory):
    import tiny_models

    return tiny_models.build_timm(tmp_path_factory.mktemp("timm") / "timm_vit")


def test_a_truncated_safetensors_checkpoint_is_refused_when_the_extractor_is_built(timm_folder, tmp_path):
    import tiny_models

    weights = truncate(Path(shutil.copy(str(timm_folder) + ".safetensors", tmp_path / "w.safetensors")))
    with pytest.raises(ValidationError) as info:
        build_extractor("t", {"type": "timm", "model": ARCH, "checkpoint": str(weights),
                              "model_args": tiny_models.TIMM_ARGS}, where="x")
    assert str(info.value) == f"weights file {weights} {TRUNCATED}incomplete metadata, file not fully covered"
    folder = Path(shutil.copytree(timm_folder, tmp_path / "folder"))
    truncate(folder / "model.safetensors")
    with pytest.raises(ValidationError) as info:
        build_extractor("t", {"type": "timm", "checkpoint": str(folder)}, where="x")
    assert str(info.value).startswith(f"weights file {folder / 'model.safetensors'} {TRUNCATED}")


def test_a_truncated_torch_checkpoint_is_refused_naming_the_key(timm_folder, tmp_path):
    import torch
    from safetensors.torch import load_file

    import tiny_models

    weights = tmp_path / "w.pth"
    torch.save(load_file(str(timm_folder) + ".safetensors"), weights)
    truncate(weights)
    with pytest.raises(ConfigError) as info:
        build_extractor("t", {"type": "timm", "model": ARCH, "checkpoint": str(weights),
                              "model_args": tiny_models.TIMM_ARGS}, where="x")
    assert str(info.value).startswith(f"x.checkpoint: {weights} is not a readable weights file (truncated or "
                                      "corrupt?): ")


def test_truncated_torch_module_weights_are_refused_naming_the_file(tmp_path):
    import torch
    from safetensors.torch import save_file

    import tiny_models

    module = tiny_models.make_mlp()
    save_file(module.state_dict(), str(tmp_path / "w.safetensors"))
    truncate(tmp_path / "w.safetensors")
    decl = {"type": "torch", "factory": "tiny_models:make_mlp", "weights": str(tmp_path / "w.safetensors")}
    with pytest.raises(ValidationError) as info:  # at plan time, with the file named
        build_extractor("mlp", decl, where="b.e")
    assert str(info.value).startswith(f"weights file {tmp_path / 'w.safetensors'} {TRUNCATED}")
    torch.save(module.state_dict(), tmp_path / "w.pt")
    truncate(tmp_path / "w.pt")
    extractor = build_extractor("mlp", {**decl, "weights": str(tmp_path / "w.pt")}, where="b.e")
    with pytest.raises(ConfigError) as info:  # a pickle checkpoint is read when the job loads it
        extractor.transform(np.zeros((2, 8)))
    assert str(info.value).startswith(f"b.e.weights: {tmp_path / 'w.pt'} is not a readable weights file (truncated "
                                      "or corrupt?): ")


@pytest.mark.parametrize("side, kind", [(20, "DecompressionBombError"), (12, "DecompressionBombWarning")])
def test_a_decompression_bomb_image_is_refused_naming_the_row_and_file(tmp_path, monkeypatch, side, kind):
    from PIL import Image

    path = tmp_path / "big.png"
    Image.new("RGB", (side, side)).save(path)
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 100)  # PIL errs past 2 x 100 pixels, and warns past 100
    with pytest.raises(ValidationError) as info:
        load_image(str(path), "cat/big.png")
    assert str(info.value) == (f"row 'cat/big.png': image {path} is refused as a possible decompression bomb: Image "
                               f"size ({side * side} pixels) exceeds limit of {100 if side == 12 else 200} pixels, "
                               "could be decompression bomb DOS attack. (PIL.Image.MAX_IMAGE_PIXELS = 100); resize it "
                               "below that")
    Image.new("RGB", (8, 8)).save(tmp_path / "small.png")
    assert load_image(str(tmp_path / "small.png"), "ok").size == (8, 8)


def test_a_decompression_bomb_in_an_image_folder_fails_the_embedding_with_its_row(timm_folder, tmp_path, monkeypatch):
    from PIL import Image

    from vertebrae.data.sources import load_source

    for name, side in (("a/0.png", 8), ("a/1.png", 8), ("b/0.png", 8), ("b/huge.png", 80)):
        (tmp_path / "images" / name).parent.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (side, side)).save(tmp_path / "images" / name)
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 2000)  # above the model's 36 x 36 resize, below 2 x 80 x 80
    data = load_source({"type": "image_folder", "path": "images"}, base_dir=tmp_path, where="benchmarks.t.dataset.source")
    extractor = build_extractor("t", {"type": "timm", "checkpoint": str(timm_folder), "device": "cpu"}, where="x")
    with pytest.raises(ValidationError, match=r"^row 'b/huge\.png': image .*huge\.png is refused as a possible "
                                              r"decompression bomb"):
        extractor.transform(data.features)
