"""Model adapters declared in a config run in the embedding rules: an image manifest embedded by a tiny open_clip
model (local-dir) and a tiny transformers ViT, in 2 shards each; the reports equal the in-process benchmark's."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from vertebrae.planning import benchmarks_from_config
from workflow_support import comparable, job_counts, snakemake, write_config, written_report


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
                # 3 classes: the score jobs and the in-process run resample rows alike; 20 (the least), not 200
                "row_resampling": {"resamples": 20},
            },
        },
    }
    write_config(tmp_path, config)
    counts = job_counts(snakemake(tmp_path, "-n", "--quiet", "rules").stdout)
    assert counts["embed_shard"] == 4 and counts.get("fit_extractor", 0) == 0
    snakemake(tmp_path)
    written = written_report(tmp_path, "pictures")
    monkeypatch.chdir(tmp_path)  # model folders in a config are relative to the working directory, like the workflow's
    expected = benchmarks_from_config(config, base_dir=tmp_path)["pictures"].run().to_dict()
    assert comparable(written) == comparable(expected)
    recipes = {r["name"]: r["embedding_metadata"]["extractor"] for r in written["extractor_results"]}
    assert recipes["clip"]["type"] == "open_clip" and "open_clip_model.safetensors" in recipes["clip"]["model"]["local_dir"]
    assert recipes["vit_layer1"]["hidden_layer"] == 1
    assert written["dataset_summary"]["modality"] == "image"


def test_text_to_image_and_image_to_image_retrieval_with_open_clip(tmp_path, monkeypatch):
    """Cross-modal retrieval from two manifests (captions -> images) through query_branch / gallery_branch, and
    same-modality image retrieval with the same image-text model and no branch keys (its default branch on both
    sides); both reports equal the in-process RetrievalBenchmark's."""
    import tiny_models

    from vertebrae.planning import plan, retrieval_benchmarks_from_config

    tiny_models.build_open_clip(tmp_path / "models" / "clip")
    paths = tiny_models.write_images(tmp_path / "data" / "images", 12)
    colors = ["red", "green", "blue"]
    with open(tmp_path / "data" / "images.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["image", "label", "id"])
        for i, path in enumerate(paths):
            writer.writerow([f"images/{path.name}", colors[i % 3], f"img-{i:02d}"])
    with open(tmp_path / "data" / "captions.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "caption"])
        for i in range(6):
            writer.writerow([f"cap-{i}", f"a photo of something {colors[i % 3]}, take {i}"])
    qrels = [f"cap-{q}\timg-{g:02d}\t{2 if g == q else 1}" for q in range(6) for g in range(12) if g % 3 == q % 3]
    (tmp_path / "data" / "qrels.tsv").write_text("\n".join(qrels) + "\n")
    clip = {"type": "open_clip", "model": "local-dir:models/clip", "batch_size": 4, "device": "cpu"}
    identity = {"kind": "declared", "revision": "1"}
    config = {
        "embedding": {"shards": 2, "batch_size": 2},  # 3 picture queries: 2 batches, so 2 shards
        "retrieval": {
            "captions": {
                "dataset": {
                    "source": {"type": "manifest_pair",
                               "queries": {"path": "data/captions.csv", "text_column": "caption", "id_column": "id"},
                               "gallery": {"path": "data/images.csv", "image_column": "image", "id_column": "id"},
                               "relevance_path": "data/qrels.tsv"},
                    "identity": {**identity, "name": "tiny-captions"},
                },
                "extractors": {"clip": clip},
                "query_branch": "text_branch", "gallery_branch": "image_branch",
            },
            "pictures": {
                "dataset": {
                    "source": {"type": "label_split", "query_every": 4, "source": {
                        "type": "manifest", "path": "data/images.csv", "image_column": "image", "id_column": "id"}},
                    "identity": {**identity, "name": "tiny-pictures"},
                },
                "extractors": {"clip": clip},
            },
        },
    }
    write_config(tmp_path, config)
    monkeypatch.chdir(tmp_path)  # model folders in a config are relative to the working directory, like the workflow's
    specs = [s for s in plan(config, base_dir=tmp_path).specs.values() if s["stage"] == "embed"]
    branches = {(s["where"].split(".")[1], s["side"]): s["branch"] for s in specs}
    assert branches == {("captions", "query"): "text_branch", ("captions", "gallery"): "image_branch",
                        ("pictures", "query"): None, ("pictures", "gallery"): None}
    assert all(len(s["shards"]) == 2 for s in specs)
    snakemake(tmp_path)
    in_process = retrieval_benchmarks_from_config(config, base_dir=tmp_path)
    written = {name: written_report(tmp_path, name) for name in ("captions", "pictures")}
    for name, report in written.items():
        assert comparable(report) == comparable(in_process[name].run().to_dict())
    captions = written["captions"]["dataset_summary"]
    assert captions["n_queries"] == 6 and captions["n_gallery"] == 12


def test_retrieval_branch_keys_are_checked_at_plan_time(tmp_path):
    import tiny_models

    from vertebrae.core.errors import ValidationError
    from vertebrae.planning import plan

    tiny_models.build_open_clip(tmp_path / "models" / "clip")
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "pair.npz", queries=rng.normal(size=(4, 3)), gallery=rng.normal(size=(5, 3)),
             query_ids=np.array(["q0", "q1", "q2", "q3"]), gallery_ids=np.array([f"g{i}" for i in range(5)]))
    (tmp_path / "qrels.tsv").write_text("".join(f"q{i}\tg{i}\t1\n" for i in range(4)))
    config = {"retrieval": {"pairs": {
        "dataset": {"source": {"type": "npz_pair", "path": "pair.npz", "relevance_path": "qrels.tsv"},
                    "identity": {"kind": "declared", "name": "p", "revision": "1"}},
        "extractors": {"clip": {"type": "open_clip", "model": f"local-dir:{tmp_path / 'models' / 'clip'}", "device": "cpu"}},
        "query_branch": "texts",
    }}}
    with pytest.raises(ValidationError, match=r"retrieval\.pairs\.query_branch: extractor 'clip' has branches "
                                              r"\['image_branch', 'text_branch'\], not 'texts'"):
        plan(config, base_dir=tmp_path)
