"""The same 12 tiny images as an image manifest, WebDataset tars and an image folder, and a zero-shot benchmark of
them: the sources whose files a job declares one by one (tests/planning/test_job_files.py,
tests/workflow/test_named_inputs.py)."""

from __future__ import annotations

from pathlib import Path

PIXELS = {"type": "callable", "cache_identity": "pixels-v1",
          "branches": {"image": "format_fixtures:image_features", "text": "format_fixtures:prompt_features"}}


def image_sources(root: Path) -> dict[str, dict]:
    """12 tiny images written under ``root``/data as a manifest (paths relative to its folder, rows by class then
    id), 3 WebDataset tars of 4 and an image folder; their source declarations by name (man, wds, fold)."""
    from format_fixtures import tiny_images, write_image_folder, write_manifest, write_tar_shards

    rows = sorted(tiny_images(12), key=lambda r: (r[1], r[0]))
    write_manifest(root / "data" / "images.csv", rows, root / "data" / "flat")
    write_tar_shards(root / "data" / "shards", rows, per_shard=4, label="txt")
    write_image_folder(root / "data" / "folder", rows)
    return {"man": {"type": "manifest", "path": "data/images.csv", "image_column": "image", "id_column": "id"},
            "wds": {"type": "webdataset", "path": "data/shards/train-{000000..000002}.tar", "image_key": "png",
                    "label_key": "txt"},
            "fold": {"type": "image_folder", "path": "data/folder"}}


def zero_shot_bench(source: dict) -> dict:
    """A zero-shot benchmark of ``source``'s images against one prompt per class (as test_data_formats.py's)."""
    return {"dataset": {"source": source}, "sample_branch": "image", "text_branch": "text",
            "prompts": [{"label": name, "texts": [f"a {name} picture"]} for name in ("blue", "green", "red")],
            "extractors": {"pixels": PIXELS}}
