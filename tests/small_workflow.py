"""A small workflow for the object-storage test (tests/workflow/test_object_storage.py): a labelled benchmark of one
precomputed file, a retrieval benchmark of one precomputed pair whose score fans out over gallery halves (issue 18's
files, ``three_files_config``), every path relative to the working folder. And the file-access audit's hook, which
the default run (tests/workflow/conftest.py) installs in its jobs (tests/workflow/test_file_access.py)."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from workflow_support import three_files_config

AUDIT_HOOK = Path(__file__).resolve().parent / "workflow" / "file_audit"  # sitecustomize.py: the jobs' file accesses


def audit_env(log_dir: Path) -> dict[str, str]:
    """The variables that make a run's job processes log their file accesses under ``log_dir`` (created)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    path = os.pathsep.join(filter(None, [str(AUDIT_HOOK), os.environ.get("PYTHONPATH")]))
    return {"PYTHONPATH": path, "VERTEBRAE_AUDIT_LOG": str(log_dir)}


def audit_log_dir(workdir: Path) -> Path:
    """Where the audited default run (tests/workflow/conftest.py, ``default_run``) logs its jobs' file accesses:
    beside its working folder, so that the run's folder holds what a user's would."""
    return workdir.parent / f"{workdir.name}-audit"


def small_config(root: Path) -> dict:
    """The config, with its data files written under ``root`` (data/, emb/)."""
    config = three_files_config(root)
    labelled = config["benchmarks"]["models"]
    labelled["extractors"] = {"a": labelled["extractors"]["a"]}
    # 3 classes: the score resamples rows (200 OverlapIndex fits by default), which no reader of this config
    # checks; 20, the least allowed, runs the same path
    labelled["row_resampling"] = {"resamples": 20}
    retrieval = config["retrieval"]["search"]
    retrieval["extractors"] = {"qa": retrieval["extractors"]["qa"]}
    retrieval["scoring"] = {"gallery_shards": 2}
    return config


def write(root: Path, config: dict) -> Path:
    path = root / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path
