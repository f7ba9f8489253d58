"""Helpers to run the real Snakemake workflow in a temporary working directory (tests only)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def snakemake(workdir: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run ``python -m snakemake`` on the repository's Snakefile inside ``workdir``."""
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir),
           "--cores", "2", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=workdir)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}")
    return proc


BIN = Path(sys.executable).parent  # the test environment's bin folder (.venv/bin): snakemake, vertebrae
# A user's own small config (tests/workflow/test_user_config.py, test_slurm.py). Only `embedding.batch_size` is
# set: alone, the schema's default of 4 shards applies (150 rows / 25 = 6 batches, so 4 shards); deep-merged into
# the demo config, the demo's `shards: 2` would.
USER_CONFIG = {
    "seed": 0,
    "embedding": {"batch_size": 25},
    "benchmarks": {"my_iris": {
        "dataset": {"source": {"type": "sklearn", "name": "iris"},
                    "identity": {"kind": "declared", "name": "my-iris", "revision": "1"}},
        "extractors": {"raw": {"type": "precomputed"}},
        "scoring": {"k": 5},
    }},
}


def unactivated_env(**extra: str) -> dict[str, str]:
    """This process's environment as a shell has it where the virtual environment is not activated: its bin
    folder is not on PATH (checked: no ``vertebrae`` is found there), plus ``extra`` variables."""
    def ours(entry: str) -> bool:
        return bool(entry) and Path(entry).resolve() == BIN.resolve()

    path = os.pathsep.join(entry for entry in os.environ.get("PATH", "").split(os.pathsep) if not ours(entry))
    env = {key: value for key, value in os.environ.items() if key not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    env.update(extra, PATH=path)
    assert shutil.which("vertebrae", path=path) is None, f"a vertebrae outside {BIN} is on PATH: nothing to test"
    return env


def clone_workflow(root: Path, user_config: dict | None = None) -> Path:
    """The repository's workflow files as a fresh clone has them (Snakefile, workflow/, profiles/, envs/ and the
    demo config/) under ``root``, and ``user_config`` as root/my-config.yaml."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "Snakefile", root / "Snakefile")
    for folder in ("workflow", "profiles", "config", "envs"):
        shutil.copytree(REPO / folder, root / folder)
    if user_config is not None:
        (root / "my-config.yaml").write_text(yaml.safe_dump(user_config, sort_keys=False), encoding="utf-8")
    return root


def write_config(workdir: Path, config: dict) -> Path:
    """Write ``config`` as workdir/config/config.yaml, next to a copy of the repository's config/data (the
    default config's text corpus, referenced by a path relative to the working directory)."""
    path = workdir / "config" / "config.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    if not (path.parent / "data").exists():
        shutil.copytree(REPO / "config" / "data", path.parent / "data")
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


def job_counts(dry_run_stdout: str) -> dict[str, int]:
    """Per-rule job counts from the table ``snakemake -n --quiet rules`` prints."""
    counts, in_table = {}, False
    for line in dry_run_stdout.splitlines():
        parts = line.split()
        if parts[:2] == ["job", "count"]:
            in_table = True
            continue
        if in_table:
            if len(parts) == 2 and parts[1].isdigit() and parts[0] != "total":
                counts[parts[0]] = int(parts[1])
            elif counts:
                break
    return counts


TIMING_KEYS = ("timings", "runtime", "runtime_seconds", "total_seconds")


def written_report(workdir: Path, benchmark: str) -> dict:
    """The report.json the workflow wrote for ``benchmark`` under ``workdir``."""
    return json.loads((workdir / "results" / "reports" / benchmark / "report.json").read_text(encoding="utf-8"))


def comparable(report: dict) -> dict:
    """A report without wall-clock timings (ours and Separatix's), which differ between any two runs."""
    if isinstance(report, dict):
        return {k: comparable(v) for k, v in report.items() if k not in TIMING_KEYS and not k.endswith("_seconds")}
    if isinstance(report, list):
        return [comparable(v) for v in report]
    return report
