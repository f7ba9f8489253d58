"""A digits benchmark declaring all four built-in labelled metrics in its config runs through Snakemake, each metric
(and OverlapIndex and Separatix) a job of its own (``fanout: true``); each merged score equals the one ``vertebrae
score`` job's, the report equals the in-process Benchmark's, and a built-in metric ranks (``primary_metric``) and is
compared. ``vertebrae verify`` checks the per-metric partials."""

from __future__ import annotations

import json

from vertebrae.core.artifacts import read_json_document
from vertebrae.stages.labelled_jobs import run_score
from vertebrae.stages.plan import run_plan
from vertebrae.stages.verify import verify
from vertebrae.planning import artifact_path, benchmarks_from_config, plan
from workflow_support import comparable, snakemake, write_config

CONFIG = {
    "seed": 0,
    "embedding": {"shards": 1, "batch_size": 512},
    "benchmarks": {
        "digits": {
            "dataset": {"source": {"type": "sklearn", "name": "digits"},
                        "identity": {"kind": "declared", "name": "sklearn-digits", "revision": "1"}},
            "extractors": {
                "pca8": {"type": "sklearn", "steps": [{"estimator": "sklearn.decomposition.PCA", "params": {"n_components": 8}}]},
                "pca16": {"type": "sklearn", "steps": [{"estimator": "sklearn.decomposition.PCA", "params": {"n_components": 16}}]},
            },
            "scoring": {"k": 2},
            "metrics": [
                {"type": "knn", "k": 10, "weighting": "temperature"},
                {"type": "linear_probe", "Cs": [0.1], "folds": 2, "inner_folds": 2, "max_iter": 200},
                {"type": "few_shot", "shots": [1, 5], "episodes": 5},
                {"type": "clustering", "n_init": 1, "repeats": 2},
            ],
            "primary_metric": "knn",
            "comparison": {"resamples": 500},
            "fanout": True,
            "separatix": {"enabled": True, "max_samples": 200, "budget": "fast"},
        },
    },
}


def test_all_four_metrics_through_snakemake_equal_in_process(tmp_path):
    write_config(tmp_path, CONFIG)
    snakemake(tmp_path)
    report = json.loads((tmp_path / "results/reports/digits/report.json").read_text())
    in_process = benchmarks_from_config(CONFIG, base_dir=tmp_path)["digits"].run().to_dict()
    assert comparable(report) == comparable(in_process)
    assert report["ranking"] == ["pca16", "pca8"]  # 16 components keep more of the digits than 8
    scores = report["extractor_results"][0]["metrics"]
    assert set(scores) == {"knn", "linear_probe", "few_shot", "clustering"}
    assert scores["knn"]["score"] > 0.8
    assert report["comparison"]["unit"] == "sample" and report["comparison"]["n_units"] == 1797
    assert set(report["metric_comparisons"]) == set(scores)
    markdown = (tmp_path / "results/reports/digits/report.md").read_text()
    assert "## Metrics" in markdown
    _check_parts_merge_to_the_one_job_score(tmp_path)


def _check_parts_merge_to_the_one_job_score(tmp_path):
    workflow_plan = plan(CONFIG, base_dir=tmp_path)
    merges = workflow_plan.fingerprints("merge-labelled-partials")
    assert len(merges) == 2 and not workflow_plan.fingerprints("score")
    spec = workflow_plan.spec(merges[0])
    assert [workflow_plan.spec(ref["fingerprint"])["recipe"]["part"] for ref in spec["partials"]] == \
        ["overlap", *["metric"] * 5, "metric", "metric", "metric", "separatix"]  # kNN: one job per fold of 5
    one_job = {key: value for key, value in spec.items() if key != "partials"}
    plan_path = tmp_path / "one-job" / f"{spec['fingerprint']}.json"
    run_plan(json.dumps({**one_job, "stage": "score"}), plan_path)
    out = tmp_path / "one-job" / "score.json"
    run_score(plan_path, tmp_path / spec["embedding"]["path"], tmp_path / spec["protocol"]["path"], out)
    merged = read_json_document(tmp_path / artifact_path("score", spec["fingerprint"]), "score",
                                fingerprint=spec["fingerprint"])
    single = read_json_document(out, "score", fingerprint=spec["fingerprint"])
    # manifest and payload, but for the timings (the score jobs' own seconds: manifest metadata, in no hash)
    assert comparable([*merged]) == comparable([*single]) and merged[1] == single[1]
    # the report's scoring cost adds up the partial jobs' seconds (each in its partial's manifest) and the merge's
    report = json.loads((tmp_path / "results/reports/digits/report.json").read_text())
    for candidate in report["extractor_results"]:
        fp = candidate["metadata"]["score_fingerprint"]
        parts = [read_json_document(tmp_path / ref["path"], "labelled-partial", fingerprint=ref["fingerprint"])[0]
                 ["metadata"]["job_costs"]["score_seconds"] for ref in workflow_plan.spec(fp)["partials"]]
        merged = read_json_document(tmp_path / artifact_path("score", fp), "score", fingerprint=fp)[0]
        total = merged["metadata"]["job_costs"]["score_seconds"]
        assert len(parts) == 10 and 0 < sum(parts) < total and candidate["metadata"]["cost"]["score_seconds"] == total
    # verify reads the partials too: a hand-edited one is found and moved aside with the score built from it
    assert verify(tmp_path / "results") == []
    partial = tmp_path / spec["partials"][1]["path"]
    document = json.loads(partial.read_text())
    document["payload"]["result"]["score"] = 1.0
    partial.write_text(json.dumps(document))
    bad = verify(tmp_path / "results", repair=True)
    assert [path for path, _ in bad] == [str(partial)], bad
    assert not (tmp_path / artifact_path("score", spec["fingerprint"])).exists()
    assert verify(tmp_path / "results") == []
