"""A small workflow for the file-access audit and the object-storage test (tests/workflow/test_file_access.py,
test_object_storage.py): a labelled benchmark of one precomputed file, a retrieval benchmark of one precomputed pair
whose score fans out over gallery halves (issue 18's files, ``three_files_config``), every path relative to the
working folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from workflow_support import REPO, three_files_config

AUDIT_HOOK = Path(__file__).resolve().parent / "workflow" / "file_audit"  # sitecustomize.py: the jobs' file accesses


def small_config(root: Path) -> dict:
    """The config, with its data files written under ``root`` (data/, emb/)."""
    config = three_files_config(root)
    labelled = config["benchmarks"]["models"]
    labelled["extractors"] = {"a": labelled["extractors"]["a"]}
    retrieval = config["retrieval"]["search"]
    retrieval["extractors"] = {"qa": retrieval["extractors"]["qa"]}
    retrieval["scoring"] = {"gallery_shards": 2}
    return config


def write(root: Path, config: dict) -> Path:
    path = root / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


def run_audited(root: Path) -> Path:
    """The small workflow run in ``root`` by Snakemake (every job a process of its own), each job process's file
    accesses logged under root/audit/ (file_audit/sitecustomize.py)."""
    root.mkdir(parents=True, exist_ok=True)
    config = write(root, small_config(root))
    (root / "audit").mkdir(exist_ok=True)
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
               PYTHONPATH=str(AUDIT_HOOK), VERTEBRAE_AUDIT_LOG=str(root / "audit"))
    env.pop("VERTEBRAE_JOB_SERVER", None)
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory",
                           str(root), "--configfile", str(config), "--cores", "2"], cwd=root, env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return root
