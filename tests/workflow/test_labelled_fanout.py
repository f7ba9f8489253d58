"""Each labelled metric its own job (issue 29, item 3): with ``fanout: true`` OverlapIndex, each stability repeat,
Separatix and each declared metric write a partial of their own, and the merge writes the score artifact the one
``vertebrae score`` job writes; adding ``few_shot`` to a finished benchmark plans only its job and what follows."""

from __future__ import annotations

import copy
import json
import subprocess
import sys

from vertebrae.core.artifacts import read_json_document
from vertebrae.stages.labelled_jobs import run_score
from vertebrae.stages.plan import run_plan
from vertebrae.stages.verify import verify
from vertebrae.workflow import artifact_path, plan
from workflow_support import job_counts, snakemake, write_config

CONFIG = {
    "seed": 0,
    "embedding": {"shards": 1, "batch_size": 2048},
    "benchmarks": {
        "digits": {
            "dataset": {"source": {"type": "sklearn", "name": "digits"},
                        "identity": {"kind": "declared", "name": "sklearn-digits", "revision": "1"}},
            "extractors": {"pca8": {"type": "sklearn", "steps": [
                {"estimator": "sklearn.decomposition.PCA", "params": {"n_components": 8}}]}},
            "scoring": {"k": 2},
            "fanout": True,
            "stability": {"enabled": True, "repeats": 2},
            "separatix": {"enabled": True, "max_samples": 200, "budget": "fast"},
            "metrics": [
                {"type": "knn", "k": 10},
                {"type": "linear_probe", "Cs": [0.1], "folds": 2, "inner_folds": 2, "max_iter": 100},
                {"type": "clustering", "n_init": 1, "repeats": 2},
            ],
            "primary_metric": "knn",
            "comparison": {"resamples": 200},
        },
    },
}
FEW_SHOT = {"type": "few_shot", "shots": [1, 5], "episodes": 5}


def _stand_in_for_a_finished_run(workdir) -> None:
    """Every output the workflow plans, present and up to date (as in test_data_edits)."""
    summary = snakemake(workdir, "--summary").stdout.splitlines()
    for line in summary[1:]:
        if line.strip():
            path = workdir / line.split("\t")[0]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
    snakemake(workdir, "--touch")


def test_adding_few_shot_plans_only_its_job_and_what_follows(tmp_path):
    write_config(tmp_path, CONFIG)
    _stand_in_for_a_finished_run(tmp_path)
    assert job_counts(snakemake(tmp_path, "-n", "--quiet", "rules").stdout) == {}
    config = copy.deepcopy(CONFIG)
    config["benchmarks"]["digits"]["metrics"].append(FEW_SHOT)
    write_config(tmp_path, config)
    counts = job_counts(snakemake(tmp_path, "-n", "--quiet", "rules").stdout)
    # plans: the new partial's, the merge's (its spec lists one more partial), the report's and the compare's
    assert counts.pop("plan") == 4, counts
    assert counts.pop("score_labelled_partial") == 1 and counts.pop("merge_labelled_partials") == 1, counts
    assert set(counts) <= {"compare", "report", "figures", "report_tables", "summary", "all"}, counts
    assert {"report", "compare", "summary"} <= set(counts), counts


def test_parts_as_jobs_merge_to_the_one_job_score(tmp_path):
    write_config(tmp_path, CONFIG)
    snakemake(tmp_path)
    _check_parts_merge_to_the_one_job_score(tmp_path)


def _check_parts_merge_to_the_one_job_score(tmp_path):
    workflow_plan = plan(CONFIG, base_dir=tmp_path)
    (merge_fp,) = workflow_plan.fingerprints("merge-labelled-partials")
    spec = workflow_plan.spec(merge_fp)
    assert [workflow_plan.spec(ref["fingerprint"])["recipe"]["part"] for ref in spec["partials"]] == \
        ["overlap", "stability", "stability", "metric", "metric", "metric", "separatix"]
    # the one-job score on the same plan (stage "score"), written in this process
    one_job = dict(spec, stage="score")
    one_job.pop("partials")
    plan_path = tmp_path / "one-job" / f"{merge_fp}.json"
    run_plan(json.dumps(one_job), plan_path)
    out = tmp_path / "one-job" / "score.json"
    run_score(plan_path, tmp_path / spec["embedding"]["path"], tmp_path / spec["protocol"]["path"], out)
    merged = read_json_document(tmp_path / artifact_path("score", merge_fp), "score", fingerprint=merge_fp)
    single = read_json_document(out, "score", fingerprint=merge_fp)
    assert merged == single  # manifest (fingerprint, recipe, content hash) and payload, bit for bit
    # (the one-job score's report equals the in-process Benchmark's: tests/workflow/test_builtin_metrics.py)
    # verify reads the partials too: a hand-edited one is found and moved aside with the score built from it
    assert verify(tmp_path / "results") == []
    partial = tmp_path / spec["partials"][3]["path"]
    document = json.loads(partial.read_text())
    document["payload"]["result"]["score"] = 1.0
    partial.write_text(json.dumps(document))
    bad = verify(tmp_path / "results", repair=True)
    assert [path for path, _ in bad] == [str(partial)], bad
    assert not (tmp_path / artifact_path("score", merge_fp)).exists()
    proc = subprocess.run([sys.executable, "-m", "vertebrae", "verify", "results"], cwd=tmp_path, capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
