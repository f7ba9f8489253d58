"""Profiles the Snakemake way: per-rule resources from the workflow profile, site settings from the SLURM profile."""

from __future__ import annotations

import re

import yaml

from workflow_support import REPO, snakemake, write_config


def _resources(dry_run_stdout: str) -> dict[str, dict[str, str]]:
    """rule -> its resources (the last job listed of each rule), from ``snakemake -n`` output."""
    found, rule = {}, None
    for line in dry_run_stdout.splitlines():
        if m := re.match(r"^(?:local)?rule (\w+):", line.strip()):
            rule = m.group(1)
        elif rule and line.strip().startswith("resources:"):
            found[rule] = dict(item.split("=", 1) for item in line.split(":", 1)[1].strip().split(", "))
    return found


def test_slurm_profile_adds_site_settings_to_the_workflow_profiles_resources(tmp_path, default_config):
    write_config(tmp_path, default_config)
    proc = snakemake(tmp_path, "-n", "--profile", str(REPO / "profiles/slurm"))
    output = proc.stdout + proc.stderr
    assert "Using profile" in output and "workflow specific profile" in output
    resources = _resources(proc.stdout)
    workflow_profile = yaml.safe_load((REPO / "profiles/default/config.yaml").read_text())["set-resources"]
    for rule in ("embed_shard", "merge_embeddings", "score", "score_retrieval"):
        assert resources[rule]["mem_mb"] == str(workflow_profile[rule]["mem_mb"]), rule
        assert resources[rule]["runtime"] == str(workflow_profile[rule]["runtime"]), rule
        assert resources[rule]["slurm_account"] == "root", rule
    assert resources["embed_shard"]["gpu"] == "0"  # scikit-learn and precomputed extractors need no GPU
    assert "gpu" not in resources["score"]
