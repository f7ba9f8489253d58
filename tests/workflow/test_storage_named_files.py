"""Files named inside the data, on object storage (issue 47): an image manifest's images, a WebDataset pattern's
tars and a model's folder are fetched for planning and declared for the jobs that read them, so a run with
``--shared-fs-usage none`` reads them from the bucket (moto's server on 127.0.0.1, as test_object_storage.py); what a
run there cannot declare is refused before any job starts, naming the key."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from image_sources import image_sources, zero_shot_bench
from vertebrae.core.errors import ConfigError, ValidationError
from vertebrae.planning import job_files
from vertebrae.planning.job_files import storage_named_files

boto3 = pytest.importorskip("boto3")
pytest.importorskip("moto.server")
from moto_bucket import client, moto_bucket  # noqa: E402

BUCKET, PREFIX = "vertebrae-named", "runs/images"
URL = f"s3://{BUCKET}/{PREFIX}"
TESTS = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def s3_env():
    tests = os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))
    with moto_bucket(BUCKET, PYTHONPATH=tests) as env:
        yield env


@pytest.fixture(scope="module")
def uploaded(s3_env, tmp_path_factory):
    """The image sources (tests/image_sources.py) and a model folder, uploaded under the prefix only."""
    data = tmp_path_factory.mktemp("named-data")
    sources = image_sources(data)
    (data / "models" / "vit").mkdir(parents=True)
    for name in ("config.json", "model.safetensors"):
        (data / "models" / "vit" / name).write_text("{}", encoding="utf-8")
    s3 = client(s3_env)
    for path in data.rglob("*"):
        if path.is_file():
            s3.upload_file(str(path), BUCKET, f"{PREFIX}/{path.relative_to(data).as_posix()}")
    return sources


def test_planning_on_storage_fetches_the_images_tars_and_model_folders_the_data_names(uploaded, s3_env, tmp_path):
    from vertebrae.core.storage import fetch_data, fetch_paths

    config = {"zero_shot": {name: zero_shot_bench(uploaded[name]) for name in ("man", "wds", "fold")},
              "extractors": {"vit": {"type": "hf_vision", "model": "models/vit"}}}
    root = tmp_path / "copy"
    fetch_data(config, URL, root, environ=s3_env, endpoint=s3_env["SNAKEMAKE_STORAGE_S3_ENDPOINT_URL"])
    assert (root / "data" / "images.csv").is_file() and len(list((root / "data" / "folder").rglob("*.png"))) == 12
    named = storage_named_files(config, str(root))
    tars = [f"data/shards/train-{i:06d}.tar" for i in range(3)]
    assert named == [*[f"data/flat/img{i:03d}.png" for i in (0, 3, 6, 9, 1, 4, 7, 10, 2, 5, 8, 11)], *tars,
                     "models/vit"]
    fetched = fetch_paths(named, URL, root, environ=s3_env, endpoint=s3_env["SNAKEMAKE_STORAGE_S3_ENDPOINT_URL"])
    assert sorted(fetched) == sorted([*named[:-1], "models/vit/config.json", "models/vit/model.safetensors"])


def test_a_manifest_run_on_storage_declares_each_shard_its_own_images(uploaded, s3_env, tmp_path):
    """The manifest's zero-shot benchmark run on the bucket up to its merged embeddings (9 jobs, ~10 s): each sample
    shard job's declared inputs, as Snakemake recorded them, are the manifest and its own rows' images (objects
    under the prefix)."""
    config = {"embedding": {"shards": 2, "batch_size": 4}, "zero_shot": {"man": zero_shot_bench(uploaded["man"])}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "vertebrae", "run", "config.yaml", "--storage", URL, "--cores", "2",
                           "--until", "merge_zero_shot"], cwd=tmp_path, env=s3_env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    shards = {}
    for record in (tmp_path / ".snakemake" / "metadata").iterdir():
        meta = json.loads(record.read_text(encoding="utf-8"))
        if meta["rule"] == "embed_zero_shot_samples":
            output = base64.b64decode(record.name.replace("@", "/")).decode()
            shards[output.rsplit("shard-", 1)[1]] = sorted(p for p in meta["input"] if "/data/" in p)
    order = [f"{URL}/data/flat/img{k:03d}.png" for k in (0, 3, 6, 9, 1, 4, 7, 10, 2, 5, 8, 11)]  # by class, then id
    assert sorted(shards) == ["0-of-2.h5", "1-of-2.h5"]
    images = [[p for p in shards[name] if p != f"{URL}/data/images.csv"] for name in sorted(shards)]
    assert all(f"{URL}/data/images.csv" in shards[name] for name in shards)
    cut = len(images[0])  # the shards' rows: consecutive, every row in one (shard bounds follow the batches)
    assert 0 < cut < 12 and images == [sorted(order[:cut]), sorted(order[cut:])], shards


def _manifest(root: Path, cells: list[str]) -> dict:
    (root / "m.csv").write_text("image,label\n" + "".join(f"{c},a\n" for c in cells), encoding="utf-8")
    return {"type": "manifest", "path": "m.csv", "image_column": "image"}


def test_what_storage_cannot_declare_is_refused_naming_the_key(tmp_path, monkeypatch):
    """An image named by URL or absolute path (a job gets only objects under the prefix), a manifest of more images
    than one job declares (pack them as WebDataset tars): refused before any job, naming the key and row."""
    for cell, what in ((f"{URL}/img/x.png", "a URL"), ("/data/img/x.png", "an absolute path")):
        config = {"zero_shot": {"z": {"dataset": {"source": _manifest(tmp_path, ["img/ok.png", cell])}}}}
        with pytest.raises(ConfigError, match=rf"^zero_shot\.z\.dataset\.source\.image_column: row 1 of m\.csv names "
                                              rf"the image '{cell}', {what}"):
            storage_named_files(config, str(tmp_path))
    monkeypatch.setattr(job_files, "MAX_DECLARED_FILES", 2)
    config = {"benchmarks": {"b": {"dataset": {"source": _manifest(tmp_path, ["a.png", "b.png", "c.png"])}}}}
    with pytest.raises(ConfigError, match=r"^benchmarks\.b\.dataset\.source\.path: m\.csv lists 3 images, more than "
                                          r"the 2 .* pack the images as WebDataset tar files"):
        storage_named_files(config, str(tmp_path))


def test_an_image_url_in_a_manifest_is_refused_naming_the_row(tmp_path):
    """Run without storage too: a URL is no file (before: 'image file not found: .../s3:/...')."""
    from vertebrae.data.sources import load_source

    (tmp_path / "ok.png").write_bytes(b"x")
    decl = _manifest(tmp_path, ["ok.png", "s3://bucket/x.png"])
    with pytest.raises(ValidationError, match=r"row 1 \(line 3\): image 's3://bucket/x.png' is a URL"):
        load_source(decl, base_dir=tmp_path, where="source")
