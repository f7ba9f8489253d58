"""A user's config, run the way the README says, from a fresh clone and without an activated environment.

Issue 18, problem 1: ``snakemake --configfile my-config.yaml`` deep-merged the user's file into config/config.yaml
(all the demo benchmarks planned too, the demo's ``embedding:`` settings applied to the user's). Problem 2: with
the environment not activated (``.venv/bin/snakemake ...``), every job failed with ``vertebrae: command not
found``. Problem 10: ``vertebrae run`` / ``vertebrae validate`` take the config file directly.

Every command here runs with a PATH that does not hold the environment's bin folder, as a user who did not
activate it has, in a copy of the repository's workflow files (``workflow_support.clone_workflow``) that still holds
the demo config/config.yaml.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from workflow_support import BIN, REPO, USER_CONFIG, clone_workflow, job_counts, unactivated_env


def run(cmd: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, cwd=cwd, env=unactivated_env(), capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, (f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n"
                                  f"{proc.stderr[-6000:]}")
    return proc


@pytest.fixture
def clone(tmp_path) -> Path:
    """The workflow files of a fresh clone, demo config included, and the user's my-config.yaml beside them."""
    return clone_workflow(tmp_path / "vertebrae", USER_CONFIG)


def test_the_readme_command_plans_my_config_alone(clone):
    # README: `snakemake --cores all --configfile my-config.yaml`, with the environment's snakemake by its path
    proc = run([str(BIN / "snakemake"), "--cores", "all", "--configfile", "my-config.yaml", "-n", "--quiet",
                "rules"], clone)
    counts = job_counts(proc.stdout)
    assert counts["report"] == 1, counts  # the demo's six benchmarks are not planned
    assert counts["embed_shard"] == 4, counts  # the demo's embedding.shards (2) does not apply
    assert not {"embed_retrieval_shard", "embed_zero_shot_samples", "fit_extractor"} & set(counts), counts
    # without a config file the demo config is the config, as before
    demo = job_counts(run([str(BIN / "snakemake"), "--cores", "all", "-n", "--quiet", "rules"], clone).stdout)
    default = yaml.safe_load((clone / "config/config.yaml").read_text(encoding="utf-8"))
    assert demo["report"] == sum(len(default[section]) for section in ("benchmarks", "retrieval", "zero_shot")), demo
    # several files given are merged in order (README): the demo and mine
    both = job_counts(run([str(BIN / "snakemake"), "--cores", "all", "--configfile", "config/config.yaml",
                           "my-config.yaml", "-n", "--quiet", "rules"], clone).stdout)
    assert both["report"] == demo["report"] + 1, both


def test_the_readme_command_runs_my_config_without_an_activated_environment(clone):
    run([str(BIN / "snakemake"), "--cores", "all", "--configfile", "my-config.yaml"], clone)
    reports = clone / "results" / "reports"
    assert sorted(p.name for p in reports.iterdir()) == ["my_iris"]
    report = json.loads((reports / "my_iris" / "report.json").read_text(encoding="utf-8"))
    assert report["dataset_summary"]["identity"] == "declared:my-iris@1"
    assert [c["name"] for c in report["extractor_results"]] == ["raw"]
    shard_logs = sorted((clone / "results" / "logs" / "embed_shard").rglob("*.log"))
    assert [p.name for p in shard_logs] == [f"shard-{i}-of-4.log" for i in range(4)]
    assert not [p for p in (clone / "results" / "logs").rglob("*.log") if "command not found" in p.read_text()]

    # `vertebrae run` (the environment's, by its path) plans the very same DAG: nothing is left to do
    proc = run([str(BIN / "vertebrae"), "run", "my-config.yaml", "--cores", "1"], clone)
    assert "Nothing to be done" in proc.stdout + proc.stderr
    proc = run([str(BIN / "vertebrae"), "validate", "my-config.yaml"], clone)
    assert "jobs to run now: 0 (everything is up to date)" in proc.stdout


def test_vertebrae_validate_and_run_from_another_directory(tmp_path):
    """`vertebrae run` finds the repository's Snakefile from any working directory, which holds the data and
    results; a config/config.yaml there is not read either."""
    (tmp_path / "config").mkdir()
    shutil.copy(REPO / "config" / "config.yaml", tmp_path / "config" / "config.yaml")
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump(USER_CONFIG, sort_keys=False), encoding="utf-8")
    proc = run([str(BIN / "vertebrae"), "validate", "mine.yaml"], tmp_path)
    lines = proc.stdout.splitlines()
    assert lines[0] == "mine.yaml: valid; 1 benchmark"
    assert lines[1] == "  labelled benchmark my_iris (benchmarks.my_iris): 1 candidate: raw"
    dry = job_counts(run([str(BIN / "vertebrae"), "run", "mine.yaml", "-n", "--quiet", "rules"], tmp_path).stdout)
    assert dry["report"] == 1 and dry["embed_shard"] == 4, dry
    assert lines[2] == (f"jobs to run now: {sum(dry.values())} ("
                        + ", ".join(f"{rule} {count}" for rule, count in dry.items()) + ")")
    # no job ran: the out folder holds the run's own state only (results/.vertebrae: digests, plans, spec files)
    assert [p.name for p in (tmp_path / "results").iterdir()] == [".vertebrae"]


def test_vertebrae_validate_names_the_config_key(tmp_path):
    bad = dict(USER_CONFIG, benchmarks={"my_iris": {**USER_CONFIG["benchmarks"]["my_iris"],
                                                  "extractors": {"raw": {"type": "precomputed", "poolin": "mean"}}}})
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(bad), encoding="utf-8")
    proc = subprocess.run([str(BIN / "vertebrae"), "validate", "bad.yaml"], cwd=tmp_path, env=unactivated_env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("vertebrae: error: ") and len(proc.stderr.strip().splitlines()) == 1
    assert "benchmarks.my_iris.extractors.raw" in proc.stderr and "poolin" in proc.stderr
    proc = subprocess.run([str(BIN / "vertebrae"), "run", "missing.yaml"], cwd=tmp_path, env=unactivated_env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "config file missing.yaml not found" in proc.stderr
