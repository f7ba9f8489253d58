"""The labelled protocol's jobs (plan, fit, embed, merge, write-protocol, compress, score, report), driven by hand in a
temporary working directory with workflow plan specs."""

from __future__ import annotations

import copy
import json
import os
from functools import partial
from pathlib import Path

import numpy as np
import pytest
from sklearn.decomposition import PCA

from vertebrae.compression import EmbeddingCompressionConfig
from vertebrae.core.artifacts import read_embeddings, read_json_artifact
from vertebrae.core.provenance import software
from vertebrae.core.errors import ArtifactError, ValidationError
from vertebrae.stages import jobs, labelled_jobs, report_job
from vertebrae.stages.plan import load_plan, run_plan
from vertebrae.planning import benchmarks_from_config, plan, report_paths
from vertebrae.planning.paths import artifact_path

plan_path, fitted_path, embedding_path, compressed_path, protocol_path, score_path = (
    partial(artifact_path, kind) for kind in ("plan", "fitted", "embedding", "compressed", "protocol", "score"))

CONFIG = {
    "seed": 3,
    "embedding": {"shards": 2, "batch_size": 16},
    "benchmarks": {
        "toy": {
            "dataset": {"source": {"type": "npz", "path": "data.npz"}, "identity": {"kind": "content"}},
            "extractors": {
                "raw": {"type": "precomputed"},
                "pca3": {"type": "sklearn",
                         "steps": [{"estimator": "sklearn.decomposition.PCA", "params": {"n_components": 3}}]},
            },
            # 3 classes: the comparison resamples rows, one OverlapIndex fit per subsample and candidate, in the
            # score jobs and in process alike; 20 subsamples (the least) instead of the default 200
            "row_resampling": {"resamples": 20},
        }
    },
}



def _same_sizes_apart_from_measured_costs(written: dict, expected: dict) -> None:
    """Pop every candidate's cost (measured in process; the jobs': what they measured of themselves, no Snakemake
    record read); the sizes must agree."""
    for mine, theirs in zip(written["extractor_results"], expected["extractor_results"]):
        a, b = mine["metadata"].pop("cost"), theirs["metadata"].pop("cost")
        assert (a["source"], b["source"]) == ("job measurements", "measured in process")
        assert a["peak_memory_mb"] > 0 and a["score_seconds"] > 0  # the embed (fit, compress) jobs', the score job's
        assert (a["dim"], a["bytes_per_vector"]) == (b["dim"], b["bytes_per_vector"])
        # 120 rows: a precomputed file costs nothing to embed; a fitted pipeline, too few rows to give a number
        assert (a["embed_status"], a["embed_seconds_per_1k_rows"]) in (("precomputed", 0.0),
                                                                       ("too few rows to measure", None))
        assert b["embed_seconds_per_1k_rows"] > 0


def _compare_and_report(workflow_plan, report_fp: str, paths: dict) -> None:
    """The compare job, then the report job reading its artifact, as the workflow runs them."""
    compare_fp = workflow_plan.comparisons[report_fp]
    inputs = workflow_plan.inputs(compare_fp)
    report_job.run_compare(inputs["plan"], inputs["report_plan"], inputs["protocol"], inputs["scores"],
                           artifact_path("comparison", compare_fp))
    report_job.run_report(inputs["report_plan"], inputs["protocol"], inputs["scores"], paths["json"], paths["markdown"],
                          comparison=artifact_path("comparison", compare_fp))

def write_data(path: Path, *, bump: float = 0.0) -> None:
    """120 rows x 6 dims, 3 classes of 40 shifted along the first axis; ``bump`` changes one value."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 6))
    X[:, 0] += np.repeat([0.0, 3.0, 6.0], 40)
    X[5, 2] += bump
    np.savez(path, embeddings=X, labels=np.repeat(["a", "b", "c"], 40))


@pytest.fixture
def workdir(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    write_data(tmp_path / "data.npz")
    return tmp_path


def write_plans(p) -> None:
    for fp in p.specs:
        run_plan(p.spec_json(fp), plan_path(fp))


def embed_stage(p) -> None:
    for fp in p.fingerprints("fit"):
        jobs.run_fit(plan_path(fp), fitted_path(fp))
    for fp in p.fingerprints("embed"):
        for i, path in enumerate(p.shard_paths(fp)):
            jobs.run_embed_shard(plan_path(fp), i, path)
        jobs.run_merge(plan_path(fp), p.shard_paths(fp), embedding_path(fp))


def test_the_chain_by_hand_equals_the_in_process_benchmark(workdir):
    p = plan(CONFIG)
    assert len(p.fingerprints("embed")) == 2 and len(p.fingerprints("fit")) == 1
    write_plans(p)
    embed_stage(p)
    for fp in p.fingerprints("protocol"):
        labelled_jobs.run_write_protocol(plan_path(fp), protocol_path(fp))
    for fp in p.fingerprints("score"):
        spec = p.spec(fp)
        assert spec["embedding"]["path"] == embedding_path(spec["embedding"]["fingerprint"])
        labelled_jobs.run_score(plan_path(fp), spec["embedding"]["path"], spec["protocol"]["path"], score_path(fp))
    report_fp = p.reports["toy"]
    spec = p.spec(report_fp)
    paths = report_paths("toy")
    _compare_and_report(p, report_fp, paths)

    for path in p.final_outputs():
        assert (workdir / path).is_file()
    for fp in p.fingerprints("embed"):
        assert [os.path.basename(s) for s in p.shard_paths(fp)] == ["shard-0-of-2.h5", "shard-1-of-2.h5"]
        assert all((workdir / s).is_file() for s in p.shard_paths(fp))

    written = json.loads((workdir / paths["json"]).read_text(encoding="utf-8"))
    expected = benchmarks_from_config(CONFIG)["toy"].run().to_dict()
    for result in expected["extractor_results"]:
        assert set(result["metadata"].pop("timings")) == {"embed_s", "embed_peak_mb", "score_s"}
    assert written["metadata"].pop("software") == software()  # the report job stamps the vertebrae that wrote it
    _same_sizes_apart_from_measured_costs(written, expected)
    assert len(written.pop("content_hash")) == 64 and written == expected  # report.json carries its hash
    assert [r["name"] for r in written["extractor_results"]] == ["raw", "pca3"]
    assert written["metadata"]["seed"] == 3
    assert written["dataset_summary"]["n_rows"] == 120
    markdown = (workdir / paths["markdown"]).read_text(encoding="utf-8")
    assert "raw" in markdown and "pca3" in markdown


def test_run_plan_refuses_a_spec_whose_recipe_was_edited(workdir):
    p = plan(CONFIG)
    fp = p.fingerprints("embed")[0]
    spec = copy.deepcopy(p.spec(fp))
    spec["recipe"]["endpoint"] = "queries"
    with pytest.raises(ValidationError, match=rf"job spec {fp}: its recipe does not hash to its fingerprint"):
        run_plan(json.dumps(spec), plan_path(fp))
    assert not (workdir / plan_path(fp)).exists()


def test_run_plan_refuses_an_extractor_that_no_longer_matches_the_recipe(workdir):
    p = plan(CONFIG)
    fp = next(fp for fp in p.fingerprints("embed") if p.spec(fp)["extractor"]["name"] == "pca3")
    spec = copy.deepcopy(p.spec(fp))
    spec["extractor"]["decl"]["steps"][0]["params"]["n_components"] = 4
    with pytest.raises(ValidationError, match=r"extractor 'pca3' does not match its recipe"):
        run_plan(json.dumps(spec), plan_path(fp))


def test_run_plan_refuses_an_unknown_stage(workdir):
    p = plan(CONFIG)
    spec = dict(p.spec(p.fingerprints("protocol")[0]), stage="transmogrify")
    with pytest.raises(ValidationError, match="unknown stage 'transmogrify'"):
        run_plan(json.dumps(spec), "results/plans/x.json")


def test_load_plan_refuses_a_plan_file_renamed_to_another_fingerprint(workdir):
    p = plan(CONFIG)
    write_plans(p)
    first, second = p.fingerprints("embed")
    (workdir / plan_path(first)).replace(workdir / plan_path(second))
    assert json.loads((workdir / plan_path(second)).read_text())["payload"]["fingerprint"] == first
    with pytest.raises(ArtifactError) as info:
        load_plan(plan_path(second), "embed")
    assert plan_path(second) in str(info.value) and first in str(info.value)


def test_load_plan_refuses_a_spec_of_another_stage(workdir):
    p = plan(CONFIG)
    write_plans(p)
    fp = p.fingerprints("protocol")[0]
    with pytest.raises(ArtifactError, match=r"a 'protocol' job spec where a 'embed' one was expected"):
        load_plan(plan_path(fp), "embed")


def test_run_embed_shard_refuses_an_out_of_range_index(workdir):
    p = plan(CONFIG)
    write_plans(p)
    fp = next(fp for fp in p.fingerprints("embed") if p.spec(fp)["fit"] is None)
    for index in (2, -1):
        out = workdir / f"shard-{index}.h5"
        with pytest.raises(ValidationError) as info:
            jobs.run_embed_shard(plan_path(fp), index, out)
        assert plan_path(fp) in str(info.value)
        assert f"shard index {index} is outside 0..1" in str(info.value)
        assert not out.exists()


def test_run_merge_refuses_a_wrong_number_of_shards(workdir):
    p = plan(CONFIG)
    write_plans(p)
    fp = next(fp for fp in p.fingerprints("embed") if p.spec(fp)["fit"] is None)
    shards = p.shard_paths(fp)
    for i, path in enumerate(shards):
        jobs.run_embed_shard(plan_path(fp), i, path)
    with pytest.raises(ValidationError, match=r"1 shard files given, the plan has 2"):
        jobs.run_merge(plan_path(fp), shards[:1], embedding_path(fp))
    with pytest.raises(ValidationError, match=r"3 shard files given, the plan has 2"):
        jobs.run_merge(plan_path(fp), [*shards, shards[0]], embedding_path(fp))
    assert not (workdir / embedding_path(fp)).exists()


def test_run_merge_refuses_shards_in_the_wrong_order(workdir):
    p = plan(CONFIG)
    write_plans(p)
    fp = next(fp for fp in p.fingerprints("embed") if p.spec(fp)["fit"] is None)
    shards = p.shard_paths(fp)
    for i, path in enumerate(shards):
        jobs.run_embed_shard(plan_path(fp), i, path)
    with pytest.raises(ArtifactError) as info:
        jobs.run_merge(plan_path(fp), shards[::-1], embedding_path(fp))
    assert shards[1] in str(info.value)  # the first file read is the misplaced one
    assert "fingerprint" in str(info.value)
    assert not (workdir / embedding_path(fp)).exists()
    jobs.run_merge(plan_path(fp), shards, embedding_path(fp))  # the right order merges
    assert (workdir / embedding_path(fp)).is_file()


def test_run_write_protocol_refuses_data_changed_after_planning(workdir):
    p = plan(CONFIG)
    write_plans(p)
    fp = p.fingerprints("protocol")[0]
    write_data(workdir / "data.npz", bump=0.5)
    with pytest.raises(ValidationError) as info:
        labelled_jobs.run_write_protocol(plan_path(fp), protocol_path(fp))
    message = str(info.value)
    assert "benchmarks.toy.dataset" in message
    assert "re-plan" in message
    assert p.spec(fp)["identity"] in message
    assert not (workdir / protocol_path(fp)).exists()

    write_data(workdir / "data.npz")  # the planned content again: accepted
    labelled_jobs.run_write_protocol(plan_path(fp), protocol_path(fp))
    assert (workdir / protocol_path(fp)).is_file()


# --------------------------------------------------------------------------------------------------
# compression and custom metrics in the artifact chain

COMPRESSED_CONFIG = copy.deepcopy(CONFIG)
COMPRESSED_CONFIG["benchmarks"]["toy"]["compression"] = [{"method": "pca", "n_components": 3}]
COMPRESSED_CONFIG["benchmarks"]["toy"]["metrics"] = [{"type": "callable", "path": "metric_fixtures:embedding_width"}]
COMPRESSED_CONFIG["benchmarks"]["toy"]["fanout"] = False  # the one score job (the fan-out: test_labelled_partials)


def _raw_embedding_fp(p) -> str:
    return next(fp for fp in p.fingerprints("embed") if p.spec(fp)["extractor"]["name"] == "raw")


def test_run_compress_writes_a_verified_artifact_with_its_compression_metadata(workdir):
    p = plan(COMPRESSED_CONFIG)
    write_plans(p)
    embed_stage(p)
    raw_fp = _raw_embedding_fp(p)
    fp = next(fp for fp in p.fingerprints("compress") if p.spec(fp)["embedding"]["fingerprint"] == raw_fp)
    labelled_jobs.run_compress(plan_path(fp), embedding_path(raw_fp), compressed_path(fp))

    artifact = read_embeddings(compressed_path(fp), fingerprint=fp)  # schema, fingerprint and content hash checked
    raw = read_embeddings(embedding_path(raw_fp), fingerprint=raw_fp)
    X = np.load(workdir / "data.npz")["embeddings"]
    assert np.array_equal(raw.matrix, X)  # the precomputed extractor passes the data through
    assert artifact.row_ids == raw.row_ids
    assert artifact.matrix.shape == (120, 3)
    assert np.allclose(artifact.matrix, PCA(3).fit(X).transform(X))  # independent sklearn PCA on the samples
    meta = artifact.manifest["metadata"]["compression"]
    assert meta["applied"] is True and meta["method"] == "pca"
    assert meta["original_dim"] == 6 and meta["compressed_dim"] == 3
    assert meta["fit_side"] == "samples" and meta["fit_rows"] == 120
    assert meta["recipe"] == EmbeddingCompressionConfig(method="pca", n_components=3).to_dict()
    assert artifact.manifest["recipe"] == p.spec(fp)["recipe"]


def test_run_compress_refuses_an_embedding_that_is_not_the_planned_one(workdir):
    p = plan(COMPRESSED_CONFIG)
    write_plans(p)
    embed_stage(p)
    raw_fp = _raw_embedding_fp(p)
    other_fp = next(fp for fp in p.fingerprints("embed") if fp != raw_fp)
    fp = next(fp for fp in p.fingerprints("compress") if p.spec(fp)["embedding"]["fingerprint"] == raw_fp)
    with pytest.raises(ArtifactError, match="stale artifact"):
        labelled_jobs.run_compress(plan_path(fp), embedding_path(other_fp), compressed_path(fp))
    assert not (workdir / compressed_path(fp)).exists()


def test_the_chain_with_compression_and_a_custom_metric_equals_the_in_process_benchmark(workdir):
    p = plan(COMPRESSED_CONFIG)
    write_plans(p)
    embed_stage(p)
    for fp in p.fingerprints("compress"):
        labelled_jobs.run_compress(plan_path(fp), p.spec(fp)["embedding"]["path"], compressed_path(fp))
    for fp in p.fingerprints("protocol"):
        labelled_jobs.run_write_protocol(plan_path(fp), protocol_path(fp))
    for fp in p.fingerprints("score"):
        spec = p.spec(fp)
        labelled_jobs.run_score(plan_path(fp), spec["embedding"]["path"], spec["protocol"]["path"], score_path(fp))
    report_fp = p.reports["toy"]
    spec = p.spec(report_fp)
    paths = report_paths("toy")
    _compare_and_report(p, report_fp, paths)

    written = json.loads((workdir / paths["json"]).read_text(encoding="utf-8"))
    expected = benchmarks_from_config(COMPRESSED_CONFIG)["toy"].run().to_dict()
    for result in expected["extractor_results"]:
        assert set(result["metadata"].pop("timings")) == {"embed_s", "embed_peak_mb", "score_s"}
    assert written["metadata"].pop("software") == software()  # the report job stamps the vertebrae that wrote it
    _same_sizes_apart_from_measured_costs(written, expected)
    assert len(written.pop("content_hash")) == 64 and written == expected  # report.json carries its hash
    assert [r["name"] for r in written["extractor_results"]] == ["raw", "raw[pca_3]", "pca3", "pca3[pca_3]"]
    widths = {r["name"]: r["metrics"]["embedding_width"]["score"] for r in written["extractor_results"]}
    assert widths == {"raw": 6.0, "raw[pca_3]": 3.0, "pca3": 3.0, "pca3[pca_3]": 3.0}
    noop = next(r for r in written["extractor_results"] if r["name"] == "pca3[pca_3]")
    assert noop["compression_metadata"]["applied"] is False  # 3 components of a 3-wide embedding: a no-op


def test_run_score_with_an_extra_metric_adds_it_to_the_payload(workdir):
    p = plan(CONFIG)
    write_plans(p)
    embed_stage(p)
    for fp in p.fingerprints("protocol"):
        labelled_jobs.run_write_protocol(plan_path(fp), protocol_path(fp))
    raw_fp = _raw_embedding_fp(p)
    fp = next(fp for fp in p.fingerprints("score") if p.spec(fp)["embedding"]["fingerprint"] == raw_fp)
    spec = p.spec(fp)
    labelled_jobs.run_score(plan_path(fp), spec["embedding"]["path"], spec["protocol"]["path"], "plain.json")
    labelled_jobs.run_score(plan_path(fp), spec["embedding"]["path"], spec["protocol"]["path"], "extra.json",
                   extra_metrics=["metric_fixtures:embedding_width", "metric_fixtures:first_column_mean"])
    plain = read_json_artifact("plain.json", "score", fingerprint=fp)
    extra = read_json_artifact("extra.json", "score", fingerprint=fp)
    assert plain["metrics"] == {}
    assert set(extra["metrics"]) == {"embedding_width", "first_column_mean"}
    X = np.load(workdir / "data.npz")["embeddings"]
    assert extra["metrics"]["embedding_width"]["score"] == 6.0
    assert extra["metrics"]["embedding_width"]["diagnostics"] == {"n_rows": 120}
    assert extra["metrics"]["first_column_mean"]["score"] == pytest.approx(X[:, 0].mean())
    assert extra["metrics"]["embedding_width"]["metadata"]["callable_path"] == "metric_fixtures:embedding_width"
    assert extra["overlap"] == plain["overlap"]  # the extra metric changes nothing else
    manifest = json.loads(Path("extra.json").read_text(encoding="utf-8"))["manifest"]
    assert manifest["recipe"]["extra_metrics"] == ["metric_fixtures:embedding_width", "metric_fixtures:first_column_mean"]
