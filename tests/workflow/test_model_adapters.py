"""Model adapters declared in a config run in the embedding rules: an image manifest embedded by a tiny open_clip
model (local-dir) and a tiny transformers ViT, in 2 shards each; the reports equal the in-process benchmark's."""

from __future__ import annotations

import csv
import json

from vertebrae.workflow import benchmarks_from_config
from workflow_support import comparable, job_counts, snakemake, write_config


def test_image_manifest_with_open_clip_and_hf_vision(tmp_path, monkeypatch):
    import tiny_models

    models = tmp_path / "models"
    tiny_models.build_open_clip(models / "clip")
    tiny_models.build_hf_vit(models / "vit")
    paths = tiny_models.write_images(tmp_path / "data" / "images", 24)
    with open(tmp_path / "data" / "images.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["image", "label", "id"])
        for i, path in enumerate(paths):
            writer.writerow([f"images/{path.name}", ["red", "green", "blue"][i % 3], f"img-{i:02d}"])
    config = {
        "embedding": {"shards": 2, "batch_size": 5},
        "benchmarks": {
            "pictures": {
                "dataset": {
                    "source": {"type": "manifest", "path": "data/images.csv", "image_column": "image", "id_column": "id"},
                    "identity": {"kind": "declared", "name": "tiny-pictures", "revision": "1"},
                },
                "extractors": {
                    "clip": {"type": "open_clip", "model": "local-dir:models/clip", "batch_size": 4, "device": "cpu"},
                    "vit_layer1": {"type": "hf_vision", "model": "models/vit", "hidden_layer": 1, "pooling": "mean",
                                   "device": "cpu"},
                },
                "scoring": {"k": 2, "min_samples_per_cluster": 2},
            },
        },
    }
    write_config(tmp_path, config)
    counts = job_counts(snakemake(tmp_path, "-n", "--quiet", "rules").stdout)
    assert counts["embed_shard"] == 4 and counts.get("fit_extractor", 0) == 0
    snakemake(tmp_path)
    written = json.loads((tmp_path / "results/reports/pictures/report.json").read_text())
    monkeypatch.chdir(tmp_path)  # model folders in a config are relative to the working directory, like the workflow's
    expected = benchmarks_from_config(config, base_dir=tmp_path)["pictures"].run().to_dict()
    assert comparable(written) == comparable(expected)
    recipes = {r["name"]: r["embedding_metadata"]["extractor"] for r in written["extractor_results"]}
    assert recipes["clip"]["type"] == "open_clip" and "open_clip_model.safetensors" in recipes["clip"]["model"]["local_dir"]
    assert recipes["vit_layer1"]["hidden_layer"] == 1
    assert written["dataset_summary"]["modality"] == "image"
