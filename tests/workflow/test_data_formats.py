"""The same images as a manifest, an image folder, a save_to_disk dataset and WebDataset shards, run by `vertebrae
run` on one config (no identity declared: every file tracked by content): the four reports hold the same scores,
and a shard without labels is refused by `vertebrae validate` before any job runs, leaving nothing under results/."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from format_fixtures import tiny_images, write_hf_dataset, write_image_folder, write_manifest, write_tar_shards
from workflow_support import write_config, written_report

pytest.importorskip("datasets")
TESTS = Path(__file__).resolve().parents[1]


def _vertebrae(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=f"{TESTS}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    return subprocess.run([str(Path(sys.executable).parent / "vertebrae"), *args], cwd=workdir, env=env,
                          capture_output=True, text=True)


def _bench(source: dict) -> dict:
    """A zero-shot benchmark of the source's images against one prompt per class."""
    return {"dataset": {"source": source},
            "prompts": [{"label": name, "texts": [f"a {name} picture"]} for name in ("blue", "green", "red")],
            "sample_branch": "image", "text_branch": "text",
            "extractors": {"pixels": {"type": "callable", "cache_identity": "pixels-v1",
                                      "branches": {"image": "format_fixtures:image_features",
                                                   "text": "format_fixtures:prompt_features"}}}}


def test_four_formats_give_the_same_report(tmp_path):
    rows = sorted(tiny_images(12), key=lambda r: (r[1], r[0]))  # the image folder's order: class, then file
    write_manifest(tmp_path / "data" / "images.csv", rows, tmp_path / "data" / "flat")
    write_image_folder(tmp_path / "data" / "folder", rows)
    write_hf_dataset(tmp_path / "data" / "hf", rows)
    write_tar_shards(tmp_path / "data" / "shards", rows, per_shard=5, label="txt")
    config = {"embedding": {"shards": 1, "batch_size": 4}, "zero_shot": {
        "manifest": _bench({"type": "manifest", "path": "data/images.csv", "image_column": "image",
                            "id_column": "id"}),
        "folder": _bench({"type": "image_folder", "path": "data/folder"}),
        "hf": _bench({"type": "hf_dataset", "path": "data/hf", "split": "train", "image_column": "image",
                      "id_column": "id"}),
        "wds": _bench({"type": "webdataset", "path": "data/shards/train-{000000..000002}.tar", "image_key": "png",
                       "label_key": "txt"}),
    }}
    past = os.stat(tmp_path).st_mtime - 60  # a user's files are older than the digest cache's racy window
    for file in (tmp_path / "data").rglob("*"):
        os.utime(file, (past, past))
    path = write_config(tmp_path, config)
    proc = _vertebrae(tmp_path, "run", str(path), "--cores", "2")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    scores = {}
    for name in config["zero_shot"]:
        report = written_report(tmp_path, name)
        result = report["candidate_results"][0]
        assert report["dataset_summary"]["n_samples"] == 12
        scores[name] = {key: result["zero_shot"][key] for key in ("metrics", "margins", "confusion_matrix")}
        scores[name]["overlap"] = result["overlap"]
    assert scores["folder"] == scores["manifest"] == scores["hf"] == scores["wds"]
    assert scores["manifest"]["metrics"]["accuracy"] == 1.0  # each class's dominant channel meets its prompt
    digests = (tmp_path / "results" / ".vertebrae" / "digests.json").read_text()
    for name in ("data/folder/red/img002.png", "data/hf/train/data-00000-of-00001.arrow",
                 "data/shards/train-000002.tar"):
        assert str((tmp_path / name).resolve()) in digests


def test_validate_refuses_a_shard_without_labels_before_any_job(tmp_path):
    rows = tiny_images(6)
    write_tar_shards(tmp_path / "data" / "shards", rows, per_shard=3, label="none")
    path = write_config(tmp_path, {"zero_shot": {"wds": _bench(
        {"type": "webdataset", "path": "data/shards/train-{000000..000001}.tar"})}})
    proc = _vertebrae(tmp_path, "validate", str(path))
    assert proc.returncode == 2
    assert "train-000000.tar, sample 'img000': no label member (img000.cls)" in proc.stderr
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").rglob("*.*"))
