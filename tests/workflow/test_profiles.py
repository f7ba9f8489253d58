"""Profiles the Snakemake way: per-rule resources from the workflow profile, site settings from the SLURM profile;
installing the site profile refuses missing values; `make test` starts no SLURM."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
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
        assert resources[rule]["runtime"] == str(workflow_profile[rule]["runtime"]), rule
        assert resources[rule]["slurm_account"] == "root", rule
    for rule in ("merge_embeddings", "score", "score_retrieval"):  # fixed per rule
        assert resources[rule]["mem_mb"] == str(workflow_profile[rule]["mem_mb"]), rule
    # embedding jobs size their own (tests/workflow/test_resources.py): the profile sets none for them
    assert "mem_mb" not in workflow_profile["embed_shard"] and int(resources["embed_shard"]["mem_mb"]) < 1000
    assert resources["embed_shard"]["gpu"] == "0"  # scikit-learn and precomputed extractors need no GPU
    assert resources["score"]["gpu"] == "0"  # no built-in metric on a CUDA device


# --- installing the site profile, and what the shipped one promises ---------------------------------------------

def _make_slurm_profile(tmp_path, **values: str) -> subprocess.CompletedProcess:
    """``make slurm-profile NAME=VALUE...`` the way the README says, into a private XDG config home."""
    env = dict(os.environ, XDG_CONFIG_HOME=str(tmp_path / "xdg"))
    for name in ("SLURM_ACCOUNT", "SLURM_PARTITION", "SLURM_GPU_PARTITION", "MAKEFLAGS", "MFLAGS"):
        env.pop(name, None)
    args = [f"{name}={value}" for name, value in values.items()]
    return subprocess.run(["make", "-s", "-C", str(REPO), "slurm-profile", *args], env=env, capture_output=True,
                          text=True, timeout=60, check=False)


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
@pytest.mark.parametrize(("values", "missing"), [
    ({"SLURM_PARTITION": "cpu"}, ["SLURM_ACCOUNT"]),
    ({"SLURM_ACCOUNT": "lab"}, ["SLURM_PARTITION"]),
    ({}, ["SLURM_ACCOUNT", "SLURM_PARTITION"]),
    ({"SLURM_ACCOUNT": "", "SLURM_PARTITION": "cpu", "SLURM_GPU_PARTITION": "gpu"}, ["SLURM_ACCOUNT"]),
])
def test_slurm_profile_refuses_a_missing_account_or_partition(tmp_path, values, missing):
    proc = _make_slurm_profile(tmp_path, **values)
    assert proc.returncode != 0, proc.stdout
    for name in ("SLURM_ACCOUNT", "SLURM_PARTITION"):
        assert (f"missing the {'SLURM account' if name == 'SLURM_ACCOUNT' else 'CPU partition'} ({name}="
                in proc.stderr) == (name in missing), proc.stderr
    assert "make slurm-profile SLURM_ACCOUNT=<account> SLURM_PARTITION=<partition>" in proc.stderr  # how to give it
    assert not (tmp_path / "xdg" / "snakemake" / "slurm").exists() or not any(
        (tmp_path / "xdg" / "snakemake" / "slurm").iterdir()), "a profile was written anyway"


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_slurm_profile_installs_the_given_account_and_partitions(tmp_path):
    proc = _make_slurm_profile(tmp_path, SLURM_ACCOUNT="lab", SLURM_PARTITION="cpu", SLURM_GPU_PARTITION="gpu")
    assert proc.returncode == 0, proc.stderr
    target = tmp_path / "xdg" / "snakemake" / "slurm"
    config = yaml.safe_load((target / "config.yaml").read_text())
    assert config["default-resources"] == {"slurm_account": "lab"}
    partitions = yaml.safe_load((target / "partitions.yaml").read_text())["partitions"]
    assert partitions == {"cpu": {"max_gpu": 0}, "gpu": {"max_gpu": 8}}


def test_shipped_slurm_profile_says_the_local_test_cluster_needs_its_overlay():
    """profiles/slurm alone polls job states with sacct (the plugin's default), which the accounting-free test
    cluster cannot answer: its comment must say so and name the overlay, which switches to squeue."""
    text = (REPO / "profiles/slurm/config.yaml").read_text()
    shipped = yaml.safe_load(text)
    overlay = yaml.safe_load((REPO / "profiles/slurm/localhost/config.yaml").read_text())
    assert "slurm-status-command" not in shipped and overlay["slurm-status-command"] == "squeue"
    comment = " ".join(line.lstrip("#").strip() for line in text.splitlines() if line.startswith("#"))
    assert "snakemake --profile profiles/slurm --profile profiles/slurm/localhost" in comment
    assert "alone is NOT enough" in comment and "sacct" in comment
    assert "as shipped it targets the single-node test cluster" not in comment  # the old, untrue promise


# --- `make test` leaves the machine alone ----------------------------------------------------------------------

SLURM_STUBS = ("apt-get", "slurmctld", "slurmd", "sbatch", "sinfo", "squeue", "scancel", "munge", "unmunge", "munged",
               "runuser", "systemctl")


def test_slurm_test_is_skipped_without_asking_and_touches_nothing(tmp_path):
    """Run tests/workflow/test_slurm.py as `make test` does (neither VERTEBRAE_SLURM nor VERTEBRAE_REQUIRE_SLURM):
    it is skipped with the way to ask, and neither cluster.sh's folder nor any SLURM, munge or apt command (each
    replaced by a stub that records its call and fails) was touched."""
    stubs, calls, slurm_dir = tmp_path / "stubs", tmp_path / "calls.log", tmp_path / "slurm"
    stubs.mkdir()
    for name in SLURM_STUBS:
        stub = stubs / name
        stub.write_text(f'#!/bin/sh\necho "{name} $*" >> "{calls}"\nexit 1\n')
        stub.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("VERTEBRAE_SLURM", "VERTEBRAE_REQUIRE_SLURM",
                                                              "PYTEST_ADDOPTS")}
    env.update(PATH=f"{stubs}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
               VERTEBRAE_SLURM_DIR=str(slurm_dir))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs",
                           str(REPO / "tests/workflow/test_slurm.py")], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    counts = re.search(r"(\d+) skipped in", proc.stdout)  # every test of the file, however many it has
    assert counts and int(counts.group(1)) >= 1 and "passed" not in proc.stdout and "failed" not in proc.stdout, \
        proc.stdout[-3000:]
    assert "make test-slurm" in proc.stdout, proc.stdout[-3000:]
    assert not calls.exists(), calls.read_text()
    assert not slurm_dir.exists()


# --- `vertebrae profile slurm`: the same profile without a checkout (issue 45) -------------------------------------

def _vertebrae(cwd, *args, xdg):
    from workflow_support import BIN

    env = dict(os.environ, XDG_CONFIG_HOME=str(xdg))
    return subprocess.run([str(BIN / "vertebrae"), *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300, check=False)


def test_vertebrae_profile_slurm_is_found_by_name_and_sets_the_account(tmp_path, default_config):
    write_config(tmp_path, default_config)
    xdg = tmp_path / "xdg"
    proc = _vertebrae(tmp_path, "profile", "slurm", "--account", "lab", "--partition", "cpu", "--gpu-partition", "gpu",
                      xdg=xdg)
    assert proc.returncode == 0, proc.stderr
    target = xdg / "snakemake" / "slurm"
    assert f"wrote the slurm profile in {target}" in proc.stdout
    assert yaml.safe_load((target / "partitions.yaml").read_text())["partitions"] == {
        "cpu": {"max_gpu": 0}, "gpu": {"max_gpu": 8}}
    shipped = yaml.safe_load((REPO / "profiles/slurm/config.yaml").read_text())
    assert yaml.safe_load((target / "config.yaml").read_text()) == {**shipped, "default-resources": {"slurm_account": "lab"}}
    dry = _vertebrae(tmp_path, "run", "config/config.yaml", "--profile", "slurm", "-n", xdg=xdg)
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert _resources(dry.stdout)["score"]["slurm_account"] == "lab"  # the user's profile, by name
    assert "warning" not in dry.stderr


def test_a_run_on_the_packaged_slurm_profile_warns_naming_account_and_partition(tmp_path, default_config):
    write_config(tmp_path, default_config)
    dry = _vertebrae(tmp_path, "run", "config/config.yaml", "--profile", "slurm", "-n", xdg=tmp_path / "empty")
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert "vertebrae: warning: --profile slurm: no slurm profile of yours was found" in dry.stderr
    assert "slurm_account ('root') and partition ('debug')" in dry.stderr
    assert "vertebrae profile slurm --account ACCOUNT --partition PARTITION" in dry.stderr


@pytest.mark.parametrize("args,message", [
    (["--account", "a b", "--partition", "cpu"], "--account: 'a b' is not a SLURM name"),
    (["--account", "lab", "--partition", "c;rm"], "--partition: 'c;rm' is not a SLURM name"),
])
def test_vertebrae_profile_slurm_refuses_a_bad_name_and_writes_nothing(tmp_path, args, message):
    proc = _vertebrae(tmp_path, "profile", "slurm", *args, xdg=tmp_path / "xdg")
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "xdg").exists()


# --- profiles/kubernetes: a cloud executor on object storage (issue 47) ---------------------------------------------

KUBERNETES_PROFILE = REPO / "profiles" / "kubernetes" / "config.v8+.yaml"
# snakemake-executor-plugin-kubernetes 0.5.1's ExecutorSettings (its source): used where the plugin is not installed
KUBERNETES_PLUGIN_SETTINGS = {"namespace", "cpu_scalar", "service_account_name", "privileged", "persistent_volumes",
                              "omit_job_cleanup"}


def _kubernetes_plugin_settings() -> tuple[set[str], bool]:
    """The plugin's setting names (from the installed plugin where there is one) and whether it is installed."""
    import dataclasses

    try:
        from snakemake_executor_plugin_kubernetes import ExecutorSettings
    except ImportError:
        return KUBERNETES_PLUGIN_SETTINGS, False
    return {field.name for field in dataclasses.fields(ExecutorSettings)}, True


def test_kubernetes_profile_names_only_settings_snakemake_and_its_plugins_accept(tmp_path, capsys):
    """Snakemake's own parser reads the profile (an unknown key or a bad value ends it with `unrecognized arguments`
    or `invalid choice`); the executor plugin's keys are checked against its settings (without the plugin installed,
    Snakemake cannot know them: they and `executor` are set aside first)."""
    import vertebrae
    from snakemake.cli import get_argument_parser
    from snakemake.profiles import ProfileConfigFileParser

    with KUBERNETES_PROFILE.open(encoding="utf-8") as stream:
        profile = yaml.safe_load(stream)
        stream.seek(0)
        ProfileConfigFileParser().parse(stream)  # Snakemake's reading of a profile: YAML mapping, key=value lists
    settings, installed = _kubernetes_plugin_settings()
    plugin_keys = {key for key in profile if key.startswith("kubernetes-")}
    assert {key.removeprefix("kubernetes-").replace("-", "_") for key in plugin_keys} <= settings, plugin_keys
    checked = tmp_path / "profile"
    checked.mkdir()
    kept = profile if installed else {k: v for k, v in profile.items() if k not in plugin_keys | {"executor"}}
    (checked / "config.v8+.yaml").write_text(yaml.safe_dump(kept), encoding="utf-8")
    try:
        args = get_argument_parser(profiles=[str(checked)]).parse_args([])
    except SystemExit:
        raise AssertionError(f"Snakemake refuses the profile: {capsys.readouterr().err[-2000:]}") from None
    assert profile["executor"] == "kubernetes" and (not installed or args.executor == "kubernetes")
    assert args.default_storage_provider == "s3" and not args.shared_fs_usage  # `none`: no part of the work shared
    # the pods run the image envs/Containerfile builds for this version, as the workflow's default `container`
    assert args.container_image == f"ghcr.io/vertebrae/vertebrae:{vertebrae.__version__}"


def test_kubernetes_profile_maps_the_rules_resources():
    """Every rule that asks for a `gpu` (embedding and partial-score jobs: 0 without CUDA) needs a manufacturer, or
    the plugin refuses the job; mem_mb and runtime stay the workflow profile's; the groups are the SLURM profile's."""
    profile = yaml.safe_load(KUBERNETES_PROFILE.read_text(encoding="utf-8"))
    rules = "".join(path.read_text(encoding="utf-8") for path in sorted((REPO / "workflow" / "rules").glob("*.smk")))
    assert re.search(r"\bgpu=", rules)  # the rules do ask for GPUs
    assert profile["default-resources"]["gpu_manufacturer"] in ("nvidia", "amd")
    assert "set-resources" not in profile and "mem_mb" not in profile["default-resources"]  # the workflow profile's
    slurm = yaml.safe_load((REPO / "profiles" / "slurm" / "config.yaml").read_text(encoding="utf-8"))
    assert profile["groups"] == slurm["groups"]
