"""Tiny models with random weights, built offline and saved the way real checkpoints are shipped.

- ``build_open_clip(folder, siglip=False)``: an open_clip CLIP (or SigLIP-style: logit bias, custom text tower
  without causal mask, last-token pooling) saved as ``open_clip_config.json`` + ``open_clip_model.safetensors``,
  loadable with ``local-dir:FOLDER`` like a hub model.
- ``build_hf_clip(folder)`` / ``build_hf_siglip(folder)``: transformers CLIPModel / SiglipModel with tokenizer
  and image processor, ``save_pretrained`` into the folder (CLIP's BPE vocab from open_clip's bundled file,
  SigLIP's sentencepiece model trained on the repository's text corpus).
- ``build_hf_vit(folder)``: a transformers ViTModel + ViTImageProcessor (a vision-only backbone).
- ``build_timm(folder)``: a timm ViT (vit_tiny_patch16_224 shrunk by model_args) saved by ``save_for_hf``
  (config.json with its data config + model.safetensors) and as a bare ``weights.safetensors`` next to it.
- ``write_images(folder, n)``: n small deterministic RGB PNGs (different sizes, so resizing is exercised).

Everything is seeded; the same call gives the same bytes.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "config" / "data" / "topics.csv"

OPEN_CLIP_CFG = {
    "embed_dim": 16,
    "vision_cfg": {"image_size": 32, "layers": 2, "width": 32, "head_width": 16, "patch_size": 8},
    "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 2},
}
PREPROCESS_CFG = {"size": [32, 32], "mode": "RGB", "mean": [0.48145466, 0.4578275, 0.40821073],
                  "std": [0.26862954, 0.26130258, 0.27577711], "interpolation": "bicubic", "resize_mode": "shortest"}


def build_open_clip(folder: Path, *, siglip: bool = False, seed: int = 0) -> Path:
    import open_clip
    import torch
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    cfg = json.loads(json.dumps(OPEN_CLIP_CFG))
    if siglip:
        cfg["init_logit_bias"] = -10
        cfg["custom_text"] = True
        cfg["text_cfg"].update({"no_causal_mask": True, "pool_type": "last"})
    name = f"vertebrae-tiny-{'siglip' if siglip else 'clip'}-{seed}".replace("siglip", "sig")  # no hub tokenizer
    registry = folder / "_registry"
    registry.mkdir(exist_ok=True)
    (registry / f"{name}.json").write_text(json.dumps(cfg))
    open_clip.add_model_config(registry)
    torch.manual_seed(seed)
    model = open_clip.create_model(name, pretrained=None)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(folder / "open_clip_model.safetensors"))
    (folder / "open_clip_config.json").write_text(json.dumps({"model_cfg": cfg, "preprocess_cfg": PREPROCESS_CFG}))
    for path in registry.iterdir():
        path.unlink()
    registry.rmdir()
    return folder


def _bpe_vocab(folder: Path) -> tuple[Path, Path]:
    """vocab.json + merges.txt equal to open_clip's bundled BPE (ids match open_clip's SimpleTokenizer)."""
    from open_clip.tokenizer import SimpleTokenizer, default_bpe

    tokenizer = SimpleTokenizer()
    vocab = folder / "vocab.json"
    encoder = dict(tokenizer.encoder)
    # open_clip names the special tokens <start_of_text> / <end_of_text>; transformers' CLIPTokenizer <|...|>
    encoder["<|startoftext|>"] = encoder.pop("<start_of_text>")
    encoder["<|endoftext|>"] = encoder.pop("<end_of_text>")
    vocab.write_text(json.dumps(encoder))
    merges = gzip.open(default_bpe()).read().decode("utf-8").split("\n")[1:49152 - 256 - 2 + 1]
    merges_file = folder / "merges.txt"
    merges_file.write_text("#version: 0.2\n" + "\n".join(merges) + "\n")
    return vocab, merges_file


def build_hf_clip(folder: Path, *, seed: int = 0) -> Path:
    import torch
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPTokenizer

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    scratch = folder / "_bpe"
    scratch.mkdir(exist_ok=True)
    vocab, merges = _bpe_vocab(scratch)
    tokenizer = CLIPTokenizer(str(vocab), str(merges))
    config = CLIPConfig(
        text_config={"vocab_size": 49408, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                     "num_attention_heads": 2, "max_position_embeddings": 77},
        vision_config={"image_size": 32, "patch_size": 8, "hidden_size": 32, "intermediate_size": 64,
                       "num_hidden_layers": 2, "num_attention_heads": 2},
        projection_dim=16,
    )
    torch.manual_seed(seed)
    CLIPModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}).save_pretrained(folder)
    for path in scratch.iterdir():
        path.unlink()
    scratch.rmdir()
    return folder


def build_hf_siglip(folder: Path, *, seed: int = 0) -> Path:
    import csv

    import sentencepiece as spm
    import torch
    from transformers import SiglipConfig, SiglipImageProcessor, SiglipModel, SiglipTokenizer

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    scratch = folder / "_spm"
    scratch.mkdir(exist_ok=True)
    with open(CORPUS, newline="", encoding="utf-8") as handle:
        texts = [row["text"] for row in csv.DictReader(handle)]
    (scratch / "corpus.txt").write_text("\n".join(texts) + "\n")
    spm.SentencePieceTrainer.train(input=str(scratch / "corpus.txt"), model_prefix=str(scratch / "spm"), vocab_size=500,
                                   model_type="unigram", pad_id=0, eos_id=1, unk_id=2, bos_id=-1,
                                   pad_piece="<pad>", eos_piece="</s>", unk_piece="<unk>", minloglevel=2)
    tokenizer = SiglipTokenizer(str(scratch / "spm.model"), model_max_length=16)
    config = SiglipConfig(
        text_config={"vocab_size": 500, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                     "num_attention_heads": 2, "max_position_embeddings": 16},
        vision_config={"image_size": 32, "patch_size": 8, "hidden_size": 32, "intermediate_size": 64,
                       "num_hidden_layers": 2, "num_attention_heads": 2},
    )
    torch.manual_seed(seed)
    SiglipModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    SiglipImageProcessor(size={"height": 32, "width": 32}).save_pretrained(folder)
    for path in scratch.iterdir():
        path.unlink()
    scratch.rmdir()
    return folder


def build_hf_vit(folder: Path, *, seed: int = 0) -> Path:
    import torch
    from transformers import ViTConfig, ViTImageProcessor, ViTModel

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    ViTModel(ViTConfig(image_size=32, patch_size=8, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                       num_attention_heads=2)).save_pretrained(folder)
    ViTImageProcessor(size={"height": 32, "width": 32}).save_pretrained(folder)
    return folder


TIMM_ARGS = {"img_size": 32, "patch_size": 8, "embed_dim": 32, "depth": 3, "num_heads": 2, "num_classes": 5}


def build_timm(folder: Path, *, seed: int = 0) -> Path:
    import timm
    import torch
    from safetensors.torch import save_file
    from timm.models import save_for_hf

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    model = timm.create_model("vit_tiny_patch16_224", pretrained=False, **TIMM_ARGS)
    save_for_hf(model, str(folder), model_args=TIMM_ARGS, safe_serialization=True)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(folder.parent / f"{folder.name}.safetensors"))
    return folder


def write_images(folder: Path, n: int = 12, *, seed: int = 0) -> list[Path]:
    from PIL import Image

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    paths = []
    for i in range(n):
        h, w = 24 + 4 * (i % 5), 28 + 3 * (i % 7)
        base = rng.integers(0, 256, size=(1, 1, 3))
        pixels = np.clip(base + rng.normal(0, 40, size=(h, w, 3)), 0, 255).astype(np.uint8)
        path = folder / f"img_{i:03d}.png"
        Image.fromarray(pixels).save(path)
        paths.append(path)
    return paths


# --- a small user module for TorchExtractor (importable as tiny_models:make_mlp etc.)


def make_mlp(width: int = 8, out: int = 3, dropout: float = 0.5):
    """Linear -> tanh -> dropout -> linear, seeded."""
    import torch

    torch.manual_seed(1)
    return torch.nn.Sequential(torch.nn.Linear(width, 16), torch.nn.Tanh(), torch.nn.Dropout(dropout),
                               torch.nn.Linear(16, out))


def train_mlp_checkpoints(folder: Path, steps=(1, 2, 3, 4), *, width: int = 8):
    """``make_mlp(width)`` trained by SGD on 48 rows of 3 classes, its state dict saved after each step in ``steps``
    as ``folder/step_{N}.safetensors`` (header metadata ``step``: 100 N); returns (rows, labels)."""
    import numpy as np
    import torch
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    y = np.repeat([0, 1, 2], 16)
    X = np.random.default_rng(0).normal(size=(len(y), width)).astype(np.float32)
    X[:, 0] += 1.2 * y
    module = make_mlp(width)
    optimizer = torch.optim.SGD(module.parameters(), lr=0.5)
    for step in range(1, max(steps) + 1):
        loss = torch.nn.functional.cross_entropy(module(torch.from_numpy(X)), torch.from_numpy(y))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step in steps:
            save_file(module.state_dict(), str(folder / f"step_{step}.safetensors"), metadata={"step": str(step * 100)})
    return X, np.array(["a", "b", "c"])[y]


def char_counts(rows):
    """Texts -> a (rows, 8) tensor of letter counts for a-h."""
    import torch

    return torch.tensor([[row.count(c) for c in "abcdefgh"] for row in rows], dtype=torch.float32)


def second_half(output, batch):
    return output[:, 1:]


def main(argv: list[str] | None = None) -> None:
    """``python tests/tiny_models.py timm DEST``: a tiny random-weight timm ViT (``DEST/vit``, a save_for_hf folder) and
    24 small images in three class folders (``DEST/images/{red,green,blue}``), built offline in seconds: fixture
    data for trying ``type: timm``, a layer sweep and ``vertebrae eval`` without downloading anything."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__.splitlines()[0])
    parser.add_argument("kind", choices=["timm"])
    parser.add_argument("dest", type=Path)
    args = parser.parse_args(argv)
    build_timm(args.dest / "vit")
    for seed, name in enumerate(("red", "green", "blue")):
        write_images(args.dest / "images" / name, 8, seed=seed)
    print(f"{args.dest / 'vit'} and {args.dest / 'images'}")


if __name__ == "__main__":
    main()
