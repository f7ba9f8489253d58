"""A layer sweep through the workflow: ``hidden_layers: [0, 1, 2]`` on a tiny timm ViT is three candidates (vit@0,
vit@1, vit@2) embedded by ONE job per shard (one forward pass per batch); each layer's merged embedding is bit for
bit the single-layer candidate's, under the same fingerprint, and the report equals the in-process benchmark's."""

from __future__ import annotations

import csv

import numpy as np

from vertebrae.planning import benchmarks_from_config, plan
from workflow_support import comparable, job_counts, snakemake, write_config, written_report


def _config(decl):
    return {
        "embedding": {"shards": 2, "batch_size": 6},
        "benchmarks": {"pictures": {
            "dataset": {"source": {"type": "manifest", "path": "data/images.csv", "image_column": "image",
                                   "id_column": "id"}, "identity": {"kind": "declared", "revision": "1", "name": "pics"}},
            "extractors": decl, "scoring": {"k": 2, "min_samples_per_cluster": 2},
            # 3 classes: the score jobs and the in-process run resample rows alike; 20 (the least), not 200
            "row_resampling": {"resamples": 20},
        }},
    }


def test_layer_sweep_is_one_pass_per_batch_and_equals_single_layers(tmp_path, monkeypatch):
    import tiny_models

    from vertebrae.core.artifacts import read_embeddings
    from vertebrae.data.declared.labelled import load_declared_rows
    from vertebrae.extractors.registry import build_extractor
    from vertebrae.stages.common import embed_endpoint

    tiny_models.build_timm(tmp_path / "models" / "vit")
    paths = tiny_models.write_images(tmp_path / "data" / "images", 12)
    with open(tmp_path / "data" / "images.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["image", "label", "id"])
        for i, path in enumerate(paths):
            writer.writerow([f"images/{path.name}", ["red", "green", "blue"][i % 3], f"img-{i:02d}"])
    base = {"type": "timm", "checkpoint": "models/vit", "device": "cpu", "batch_size": 4}
    config = _config({"vit": {**base, "hidden_layers": [0, 1, -1]}})
    write_config(tmp_path, config)
    counts = job_counts(snakemake(tmp_path, "-n", "--quiet", "rules").stdout)
    assert counts["embed_sweep_shard"] == 2 and "embed_shard" not in counts and counts["merge_embeddings"] == 3
    snakemake(tmp_path)
    monkeypatch.chdir(tmp_path)
    report = written_report(tmp_path, "pictures")
    assert sorted(r["name"] for r in report["extractor_results"]) == ["vit@-1", "vit@0", "vit@1"]
    assert comparable(report) == comparable(benchmarks_from_config(config, base_dir=tmp_path)["pictures"].run().to_dict())
    dataset = config["benchmarks"]["pictures"]["dataset"]
    inputs, ids = load_declared_rows(dataset, base_dir=tmp_path, where="d", start=0, stop=12)
    for layer in (0, 1, -1):  # the single-layer candidate: its own plan's fingerprint, its own embed path's bytes
        single = plan(_config({"one": {**base, "hidden_layer": layer}}), base_dir=tmp_path)
        (fp,) = single.fingerprints("embed")
        merged = read_embeddings(tmp_path / "results" / "embeddings" / f"{fp}.h5", fingerprint=fp)
        expected = embed_endpoint(build_extractor("one", {**base, "hidden_layer": layer}, where="x"), inputs, ids,
                                  shards=2, batch_size=6, endpoint="samples")
        assert np.array_equal(merged.matrix, expected.matrix) and merged.row_ids == expected.row_ids
    from vertebrae.stages.verify import verify

    assert verify(tmp_path / "results") == []  # each layer's shard file in a sweep folder is checked as a shard
    # back to one single-layer candidate: the same fingerprint, but Snakemake ties a merge to the shard files it read
    # (the sweep's folders), so the layer's own embed jobs run once (one pass, as the sweep's was)
    write_config(tmp_path, _config({"vit@1": {**base, "hidden_layer": 1}}))
    counts = job_counts(snakemake(tmp_path, "-n", "--quiet", "rules").stdout)
    assert "embed_sweep_shard" not in counts and counts["embed_shard"] == 2 and counts["merge_embeddings"] == 1


def test_plan_groups_the_layers_and_refuses_bad_ones(tmp_path, monkeypatch):
    import pytest
    import tiny_models

    from vertebrae.core.errors import ConfigError
    from vertebrae.stages.plan import load_plan, run_plan

    tiny_models.build_timm(tmp_path / "models" / "vit")
    tiny_models.write_images(tmp_path / "data" / "images", 4)
    (tmp_path / "data" / "images.csv").write_text(
        "image,label,id\n" + "".join(f"images/img_{i:03d}.png,{'ab'[i % 2]},i{i}\n" for i in range(4)))
    monkeypatch.chdir(tmp_path)
    base = {"type": "timm", "checkpoint": "models/vit", "device": "cpu"}
    result = plan(_config({"vit": {**base, "hidden_layers": [2, 0]}, "two": {**base, "hidden_layer": 2}}))
    (sweep_fp,) = result.fingerprints("embed-sweep")
    sweep = result.spec(sweep_fp)
    single = plan(_config({"one": {**base, "hidden_layer": 0}})).fingerprints("embed")
    assert [layer["layer"] for layer in sweep["layers"]] == [2, 0] and sweep["recipe"]["embeddings"][1] == single[0]
    assert len(result.fingerprints("embed")) == 2  # two@... and vit@2 are one embedding, under one fingerprint
    assert [c["name"] for c in result.spec(result.reports["pictures"])["candidates"]] == ["vit@2", "vit@0", "two"]
    assert result.inputs(single[0], merge=True)["shards"] == ["results/sweeps/%s/shard-0-of-1" % sweep_fp]
    result.write_spec_files(tmp_path)
    run_plan(None, tmp_path / f"{sweep_fp}.json", spec_file=tmp_path / result.spec_file(sweep_fp))  # re-derived
    assert load_plan(tmp_path / f"{sweep_fp}.json", "embed-sweep")["fingerprint"] == sweep_fp
    with pytest.raises(ConfigError, match=r"extractors\.vit@4\.hidden_layer: 4 is beyond the depth of vit_tiny"):
        plan(_config({"vit": {**base, "hidden_layers": [0, 4]}}))  # 3 blocks: 3 is the last block's output
    with pytest.raises(ConfigError, match=r"extractors\.vit\.hidden_layers: a layer sweep needs an extractor of type"):
        plan(_config({"vit": {"type": "precomputed", "hidden_layers": [1]}}))
