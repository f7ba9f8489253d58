"""Many candidates: job specs travel in files, so 1,000 precomputed candidates plan and a report spec over Linux's
128 KiB single-argument limit runs (issue 18, problem 5); spec files rerun exactly what a spec change reaches."""

from __future__ import annotations

import errno
import shutil
import subprocess

import numpy as np
import pytest
from workflow_support import job_counts, snakemake, write_config

import vertebrae.planning
from vertebrae.core.artifacts import read_json_artifact
from vertebrae.core.fingerprint import canonical_json

MAX_ARG_STRLEN = 32 * 4096  # Linux: the longest single argument (bash -c gets a job's whole shell line as one)
ROWS = 60


def candidates_config(paths: dict[str, str]) -> dict:
    """A labelled benchmark of the 60-row dataset with one precomputed candidate per file (name -> path)."""
    return {"seed": 0, "embedding": {"shards": 1}, "benchmarks": {"many": {
        "dataset": {"source": {"type": "npz", "path": "data/dataset.npz", "features_key": "embeddings",
                               "labels_key": "labels"},
                    "identity": {"kind": "declared", "name": "tiny", "revision": "1"}},
        "extractors": {name: {"type": "precomputed", "path": path} for name, path in paths.items()},
        "scoring": {"k": 4},
        "row_resampling": {"resamples": 20},  # 3 classes: each score job resamples rows; 20 (the least), not 200
    }}}


def many_candidates(workdir, n: int) -> dict:
    """A 60-row labelled dataset and ``n`` precomputed candidates, each from its own .npy file (dataset order)."""
    data = workdir / "data"
    data.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    labels = np.arange(ROWS) % 3
    np.savez(data / "dataset.npz", embeddings=np.zeros((ROWS, 1), np.float32), labels=labels)
    for i in range(n):
        np.save(data / f"c{i:04d}.npy", (labels[:, None] + rng.normal(size=(ROWS, 2))).astype(np.float32))
    config = candidates_config({f"c{i:04d}": f"data/c{i:04d}.npy" for i in range(n)})
    write_config(workdir, config)
    return config


def shell_commands(proc: subprocess.CompletedProcess) -> list[str]:
    """The shell lines ``snakemake -n -p`` prints (one line each here)."""
    prefix = "Shell command: "
    return [line.strip()[len(prefix):] for line in (proc.stdout + proc.stderr).splitlines()
            if line.strip().startswith(prefix)]


def test_a_thousand_candidates_plan_with_every_shell_line_under_the_limit(tmp_path):
    many_candidates(tmp_path, 1000)
    proc = snakemake(tmp_path, "-n", "-p")
    counts = job_counts(proc.stdout)
    # 1,000 embedding + 1,000 score specs, the protocol's, the report's and the comparison's
    assert counts["plan"] == 2003 and counts["score"] == 1000 and counts["report"] == 1, counts
    commands = shell_commands(proc)
    plans = [c for c in commands if c.startswith("vertebrae plan ")]
    assert len(plans) == 2003 and all(" --spec-file results/.vertebrae/specs/" in c for c in plans)
    longest = max(commands, key=len)
    assert longest.startswith(("vertebrae report ", "vertebrae compare "))  # 1,000 score paths: ~37 KB
    assert len(longest.encode()) < MAX_ARG_STRLEN // 3, longest[:200]
    spec_files = sorted((tmp_path / "results" / ".vertebrae" / "specs").iterdir())
    assert len(spec_files) == 2003 and max(p.stat().st_size for p in spec_files) > 5 * MAX_ARG_STRLEN


def test_a_report_spec_over_the_argument_limit_plans_for_real(tmp_path, monkeypatch):
    config = many_candidates(tmp_path, 200)
    monkeypatch.chdir(tmp_path)  # candidate files resolve against the working directory, as in a job
    workflow_plan = vertebrae.planning.plan(config)
    report = workflow_plan.reports["many"]
    compare = workflow_plan.comparisons[report]
    text = canonical_json(workflow_plan.spec(report))
    assert len(text.encode()) > MAX_ARG_STRLEN  # so the former `--spec TEXT` could not even start:
    with pytest.raises(OSError) as too_long:
        subprocess.run(["bash", "-c", f"true {text}"], check=False)
    assert too_long.value.errno == errno.E2BIG
    targets = [workflow_plan.plan_path(report), workflow_plan.plan_path(compare)]
    proc = snakemake(tmp_path, *targets)
    assert "2 of 2 steps (100%) done" in proc.stderr
    written = read_json_artifact(tmp_path / targets[0], "plan", fingerprint=report)
    assert canonical_json(written) == text and len(written["candidates"]) == 200


def changed_specs(before: dict, after: dict) -> set[str]:
    """The planned specs of ``after`` (config dicts) whose text differs from ``before``'s (or is new)."""
    old, new = vertebrae.planning.plan(before), vertebrae.planning.plan(after)
    return {fp for fp in new.planned()
            if fp not in old.specs or canonical_json(old.spec(fp)) != canonical_json(new.spec(fp))}


def test_spec_files_rerun_what_a_spec_change_reaches_and_nothing_when_rewritten(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    before = many_candidates(tmp_path, 3)
    snakemake(tmp_path)
    # spec files written again (a deleted results/.vertebrae/): same names, newer files, nothing to rerun
    shutil.rmtree(tmp_path / "results" / ".vertebrae")
    assert job_counts(snakemake(tmp_path, "-n", "--quiet", "rules").stdout) == {}
    assert len(list((tmp_path / "results" / ".vertebrae" / "specs").iterdir())) == 2 * 3 + 3  # + protocol, report, compare
    # a change outside every recipe (a candidate file moved, same content: its recipe holds the file's digest, its
    # spec the path) renames that spec's file: exactly the plan jobs of changed specs rerun, then what reads them
    shutil.copy(tmp_path / "data" / "c0001.npy", tmp_path / "data" / "moved.npy")
    after = candidates_config({"c0000": "data/c0000.npy", "c0001": "data/moved.npy", "c0002": "data/c0002.npy"})
    changed = changed_specs(before, after)
    assert changed and all(vertebrae.planning.plan(after).spec(fp)["stage"] == "embed" for fp in changed)
    write_config(tmp_path, after)
    counts = job_counts(snakemake(tmp_path, "-n", "--quiet", "rules").stdout)
    assert counts["plan"] == len(changed) and counts["embed_shard"] == 1 and counts["score"] == 1, counts
    snakemake(tmp_path)
    assert job_counts(snakemake(tmp_path, "-n", "--quiet", "rules").stdout) == {}
