"""The Snakemake workflow, run for real, against the in-process Benchmark for the same config."""

from __future__ import annotations

import json
import subprocess
import sys

import yaml

from vertebrae.results import BenchmarkResult
from vertebrae.workflow import benchmarks_from_config, plan

from workflow_support import REPO, job_counts, snakemake, write_config

EXPECTED_JOBS = {
    "plan": 10,  # 3 embed + 2 fit + 1 protocol + 3 score + 1 report job specs
    "fit_extractor": 2,
    "embed_shard": 12,  # 3 extractors x 4 shards
    "merge_embeddings": 3,
    "write_protocol": 1,
    "score": 3,
    "report": 1,
    "all": 1,
}


def _without_timings(report: dict) -> dict:
    for result in report["extractor_results"]:
        result["metadata"].pop("timings", None)
    return report


def test_workflow_scores_equal_in_process_benchmark(default_run, default_config):
    written = json.loads((default_run / "results/reports/digits/report.json").read_text())
    in_process = benchmarks_from_config(default_config, base_dir=default_run)["digits"].run()
    expected = _without_timings(in_process.to_dict())
    assert _without_timings(written) == expected
    # and the check is not vacuous: three candidates with real, distinct scores
    scores = [r["primary_score"] for r in written["extractor_results"]]
    assert len(scores) == 3 and len(set(scores)) == 3 and all(0.5 < s <= 1.0 for s in scores)
    assert written["ranking"] == [r.name for r in BenchmarkResult.from_dict(written).ranked_results()]


def test_markdown_report_ranks_every_extractor(default_run):
    markdown = (default_run / "results/reports/digits/report.md").read_text()
    report = json.loads((default_run / "results/reports/digits/report.json").read_text())
    positions = [markdown.index(f"| {rank} | {name} |") for rank, name in enumerate(report["ranking"], start=1)]
    assert positions == sorted(positions)


def test_second_run_has_nothing_to_do(default_run):
    proc = snakemake(default_run, "-n")
    assert "Nothing to be done" in proc.stdout + proc.stderr


def test_dry_run_lists_expected_jobs_per_rule(tmp_path, default_config):
    write_config(tmp_path, default_config)
    assert job_counts(snakemake(tmp_path, "-n", "--quiet", "rules").stdout) == EXPECTED_JOBS


def test_shard_files_are_named_by_fingerprint_and_capped(default_run, default_config):
    workflow_plan = plan(default_config, base_dir=default_run)
    for fp in workflow_plan.fingerprints("embed"):
        assert [p for p in workflow_plan.shard_paths(fp)] == [f"results/embeddings/{fp}/shard-{i}-of-4.h5" for i in range(4)]
        assert all((default_run / p).exists() for p in workflow_plan.shard_paths(fp))


def test_scoring_change_reruns_only_scores_and_report(workdir_copy, default_config):
    changed = json.loads(json.dumps(default_config))
    changed["benchmarks"]["digits"]["scoring"]["k"] = 20
    write_config(workdir_copy, changed)
    counts = job_counts(snakemake(workdir_copy, "-n", "--quiet", "rules").stdout)
    assert counts == {"plan": 4, "score": 3, "report": 1, "all": 1}


def test_extractor_change_reruns_only_that_extractor(workdir_copy, default_config):
    changed = json.loads(json.dumps(default_config))
    changed["benchmarks"]["digits"]["extractors"]["pca16"]["steps"][1]["params"]["n_components"] = 8
    write_config(workdir_copy, changed)
    counts = job_counts(snakemake(workdir_copy, "-n", "--quiet", "rules").stdout)
    assert counts == {"plan": 4, "fit_extractor": 1, "embed_shard": 4, "merge_embeddings": 1, "score": 1, "report": 1, "all": 1}


def test_lint_is_clean():
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--lint"], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Congratulations, your workflow is in a good condition!" in proc.stdout + proc.stderr


def test_unknown_config_key_is_a_vertebrae_error_naming_it(tmp_path, default_config):
    bad = json.loads(json.dumps(default_config))
    bad["benchmarks"]["digits"]["scoring"]["kk"] = 3
    write_config(tmp_path, bad)
    proc = snakemake(tmp_path, "-n", check=False)
    assert proc.returncode != 0
    output = proc.stdout + proc.stderr
    assert "ConfigError" in output and "benchmarks.digits.scoring" in output and "'kk'" in output
