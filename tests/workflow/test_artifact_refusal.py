"""CLI stages refuse stale, corrupt or swapped artifacts from a real workflow run, naming the path."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from vertebrae.planning import artifact_path, plan


def _vertebrae(workdir, *args):
    return subprocess.run([sys.executable, "-m", "vertebrae", *args], cwd=workdir, capture_output=True, text=True)


def _score_specs(workdir, config):
    workflow_plan = plan(config, base_dir=workdir)
    return [workflow_plan.spec(fp) for fp in workflow_plan.fingerprints("score")]


def test_score_refuses_embeddings_of_another_candidate(workdir_copy, default_config):
    first, second = _score_specs(workdir_copy, default_config)[:2]
    proc = _vertebrae(workdir_copy, "score", "--plan-json", artifact_path("plan", first["fingerprint"]),
                      "--embeddings", second["embedding"]["path"], "--protocol", first["protocol"]["path"],
                      "--output", "results/scores/new.json")
    assert proc.returncode == 2
    assert "stale" in proc.stderr and second["embedding"]["path"] in proc.stderr
    assert not (workdir_copy / "results/scores/new.json").exists()


def test_truncated_embeddings_are_refused_by_score(workdir_copy, default_config):
    spec = _score_specs(workdir_copy, default_config)[0]
    path = workdir_copy / spec["embedding"]["path"]
    size = path.stat().st_size
    with open(path, "r+b") as handle:
        handle.truncate(size // 2)
    proc = _vertebrae(workdir_copy, "score", "--plan-json", artifact_path("plan", spec["fingerprint"]),
                      "--embeddings", spec["embedding"]["path"], "--protocol", spec["protocol"]["path"],
                      "--output", spec["fingerprint"] + ".json")
    assert proc.returncode == 2 and spec["embedding"]["path"] in proc.stderr


def test_tampered_score_is_refused_by_report(workdir_copy, default_config):
    spec = _score_specs(workdir_copy, default_config)[0]
    path = workdir_copy / "results/scores" / f"{spec['fingerprint']}.json"
    document = json.loads(path.read_text())
    document["payload"]["overlap"]["score"] = 1.0
    path.write_text(json.dumps(document))
    workflow_plan = plan(default_config, base_dir=workdir_copy)
    report = workflow_plan.spec(workflow_plan.reports["digits"])
    proc = _vertebrae(workdir_copy, "report", "--plan-json", artifact_path("plan", report["fingerprint"]),
                      "--protocol", report["protocol"]["path"], "--json-output", "r.json", "--markdown-output", "r.md",
                      *[c["score"]["path"] for c in report["candidates"]])
    assert proc.returncode == 2 and "content hash" in proc.stderr and str(path.relative_to(workdir_copy)) in proc.stderr
    assert not os.path.exists(workdir_copy / "r.json")
