"""Crash safety: SIGKILL mid-run, corruption of a finished artifact, and the recoveries the README documents.

README, "Resuming after a failure or a kill": after a kill run ``snakemake --unlock`` once, then the same command
again (``rerun-incomplete`` is in the workflow profile); a corrupt artifact is refused naming its path and moved
aside with everything built from it: running the same command again rebuilds them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import pytest

from vertebrae.core.artifacts import read_embeddings
from vertebrae.core.errors import ArtifactError
from vertebrae.stages.plan import shard_fingerprint
from vertebrae.planning import benchmarks_from_config, plan

from workflow_support import REPO, comparable, snakemake, write_config

SHARDS = 4
CRASH_CONFIG = {
    "seed": 0,
    "embedding": {"shards": SHARDS, "batch_size": 64},
    "benchmarks": {
        "digits": {
            "dataset": {"source": {"type": "sklearn", "name": "digits"},
                        "identity": {"kind": "declared", "name": "sklearn-digits", "revision": "1"}},
            "extractors": {
                "pixels": {"type": "precomputed"},
                "pca16": {"type": "sklearn", "steps": [{"estimator": "sklearn.decomposition.PCA",
                                                        "params": {"n_components": 16}}]},
            },
            "scoring": {"k": "auto"},
        },
    },
}


def _shards(workdir: Path) -> list[Path]:
    return sorted((workdir / "results" / "embeddings").glob("*/shard-*-of-*.h5"))


def _verify_every_shard(workdir: Path, config: dict) -> int:
    """Read (and so verify schema, fingerprint and content hash of) every shard under its final name."""
    workflow_plan = plan(config, base_dir=workdir)
    checked = 0
    for fp in workflow_plan.fingerprints("embed"):
        spec = workflow_plan.spec(fp)
        for i, path in enumerate(workflow_plan.shard_paths(fp)):
            if (workdir / path).exists():
                read_embeddings(workdir / path, fingerprint=shard_fingerprint(spec, i))
                checked += 1
    return checked


def test_sigkill_while_shards_are_written_then_rerun_as_documented(tmp_path):
    workdir = tmp_path / "run"
    write_config(workdir, CRASH_CONFIG)
    total = 2 * SHARDS
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir),
           "--cores", "2"]
    proc = subprocess.Popen(cmd, cwd=workdir, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + 600
    try:
        while len(_shards(workdir)) < 3:
            assert proc.poll() is None, "the workflow ended before it could be killed"
            assert time.monotonic() < deadline, "no shard written within 600 s"
            time.sleep(0.02)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # snakemake and every job it started, mid-write
        proc.wait()
    written = _shards(workdir)
    assert 3 <= len(written) < total, "the kill must land while shards are being written"
    assert not (workdir / "results" / "reports").exists()

    # whatever carries a final name is complete and verifies; half-written bytes only ever live in .tmp files
    assert _verify_every_shard(workdir, CRASH_CONFIG) == len(written)

    locked = snakemake(workdir, check=False)
    assert locked.returncode != 0 and "lock" in (locked.stdout + locked.stderr).lower()
    snakemake(workdir, "--unlock")
    snakemake(workdir)

    assert len(_shards(workdir)) == total and _verify_every_shard(workdir, CRASH_CONFIG) == total
    logs = [p.read_text(encoding="utf-8", errors="replace") for p in (workdir / "results" / "logs").rglob("*.log")]
    assert not any("ArtifactError" in text or "vertebrae: error" in text for text in logs)
    written_report = json.loads((workdir / "results/reports/digits/report.json").read_text(encoding="utf-8"))
    uninterrupted = benchmarks_from_config(CRASH_CONFIG, base_dir=workdir)["digits"].run().to_dict()
    assert comparable(written_report) == comparable(uninterrupted)
    assert "Nothing to be done" in (lambda p: p.stdout + p.stderr)(snakemake(workdir, "-n"))


def _score_input(workdir: Path, config: dict) -> tuple[str, str, str]:
    """(merged embedding path, its fingerprint, its score spec's fingerprint) of the first labelled score job."""
    workflow_plan = plan(config, base_dir=workdir)
    spec = workflow_plan.spec(workflow_plan.fingerprints("score")[0])
    return spec["embedding"]["path"], spec["embedding"]["fingerprint"], spec["fingerprint"]


def test_corrupt_finished_artifact_is_refused_then_recovered(workdir_copy, default_config):
    path, embedding_fp, score_fp = _score_input(workdir_copy, default_config)
    target = workdir_copy / path
    before = {p: json.loads((workdir_copy / p).read_text()) for p in
              (str(q.relative_to(workdir_copy)) for q in (workdir_copy / "results/reports").glob("*/report.json"))}
    with h5py.File(target, "r+") as handle:  # silent corruption: a valid HDF5 file, one value changed
        data = handle["embeddings"]
        data[0, 0] = data[0, 0] + 1.0
    with pytest.raises(ArtifactError, match="content hash"):
        read_embeddings(target, fingerprint=embedding_fp)

    # the changed file is newer than its consumers, so they rerun and refuse it (--keep-going: every one of them runs)
    refused = snakemake(workdir_copy, "--keep-going", check=False)
    assert refused.returncode != 0
    # the first consumer to read it refuses it by path and moves it aside; any other consumer then says where it went
    logs = [log.read_text(encoding="utf-8") for log in sorted((workdir_copy / "results" / "logs").rglob("*.log"))]
    refusals = [log for log in logs if path in log and "content hash" in log and "vertebrae: error" in log]
    assert refusals and any("moved it aside" in log for log in refusals) and not target.exists()
    score_log = (workdir_copy / "results" / "logs" / "score" / f"{score_fp}.log").read_text(encoding="utf-8")
    assert path in score_log and ("content hash" in score_log or "moved aside as corrupt" in score_log)
    assert not (workdir_copy / "results" / "scores" / f"{score_fp}.json").exists()

    # the corrupt file went aside with everything built from it, so the same command rebuilds them
    snakemake(workdir_copy)
    read_embeddings(target, fingerprint=embedding_fp)
    for report, document in before.items():
        assert comparable(json.loads((workdir_copy / report).read_text())) == comparable(document), report
