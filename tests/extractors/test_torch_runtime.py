"""Inference plumbing: device choice, eval-mode restore, ordered batching with workers, image errors, hashes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from vertebrae.core.errors import ConfigError, ValidationError
from vertebrae.extractors.torch_runtime import (
    batches, check_device, check_dtype, eval_mode, file_sha256, inference, load_image, resolve_device,
)


def test_device_resolution():
    expected = "cuda" if torch.cuda.is_available() else ("mps" if torch.backends.mps.is_available() else "cpu")
    assert resolve_device("auto").type == expected
    assert resolve_device("cpu").type == "cpu"
    with pytest.raises(ConfigError, match=r"b\.e\.device"):
        check_device("tpu", where="b.e")
    with pytest.raises(ConfigError, match=r"b\.e\.dtype"):
        check_dtype("float64", where="b.e")


def test_eval_mode_restores_mixed_flags():
    module = torch.nn.Sequential(torch.nn.Dropout(0.5), torch.nn.Dropout(0.5))
    module.train()
    module[1].eval()
    with eval_mode(module):
        assert not any(m.training for m in module.modules())
    assert module.training and module[0].training and not module[1].training
    with pytest.raises(RuntimeError):
        with inference(module, torch.device("cpu")):
            assert torch.is_inference_mode_enabled()
            raise RuntimeError("boom")
    assert module.training and not module[1].training


def square(i):
    return i * i


@pytest.mark.parametrize("workers", [0, 2])
def test_batches_keep_order(workers):
    items = list(range(11))
    out = list(batches(items, batch_size=3, collate=lambda b: list(b), load=square, num_workers=workers))
    assert [len(b) for b in out] == [3, 3, 3, 2]
    assert [int(v) for b in out for v in b] == [i * i for i in items]


def test_load_image_errors_name_row_and_path(tmp_path):
    from PIL import Image

    Image.fromarray(np.zeros((4, 5), dtype=np.uint8)).save(tmp_path / "gray.png")
    assert load_image(str(tmp_path / "gray.png"), "r").mode == "RGB"
    (tmp_path / "bad.jpg").write_bytes(b"\x00" * 10)
    with pytest.raises(ValidationError, match=r"row 'r7': cannot decode image .*bad\.jpg"):
        load_image(str(tmp_path / "bad.jpg"), "r7")
    with pytest.raises(ValidationError, match=r"row 3: image file not found: .*none\.png"):
        load_image(str(tmp_path / "none.png"), 3)


def test_file_hash_follows_content(tmp_path):
    path = tmp_path / "w.bin"
    path.write_bytes(b"abc")
    first = file_sha256(path)
    assert first == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    path.write_bytes(b"abcd")
    assert file_sha256(path) != first


def test_weights_digests_go_through_the_planners_cache_only(tmp_path, monkeypatch):
    """A large weights file's digest is kept in the run's digests.json while a config is planned; a job (no planning
    under way) hashes it and writes nothing (issue 47: the run's cache serves planning only)."""
    import os

    from vertebrae.core import file_digests
    from vertebrae.core.out_folder import writing_to

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(file_digests, "LARGE_BYTES", 16)
    monkeypatch.setattr(file_digests, "_MEMO", {})
    path = tmp_path / "w.bin"
    path.write_bytes(b"w" * 64)
    os.utime(path, (1e9, 1e9))
    job = file_sha256(path)
    assert not (tmp_path / "results").exists()
    monkeypatch.setattr(file_digests, "_MEMO", {})
    with writing_to("results"):
        assert file_sha256(path) == job
    assert str(path.resolve()) in (tmp_path / "results" / file_digests.CACHE_FILE).read_text(encoding="utf-8")
