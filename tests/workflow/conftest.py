"""Fixtures: the default workflow run once per session, and private copies of it."""

from __future__ import annotations

import fcntl
import os
import shutil
import time
from pathlib import Path

import pytest
import yaml

from small_workflow import audit_env, audit_log_dir
from workflow_support import DEFAULT_RUN_SECONDS, REPO, snakemake, write_config


@pytest.fixture(scope="session")
def default_config() -> dict:
    return yaml.safe_load((REPO / "config" / "config.yaml").read_text(encoding="utf-8"))


@pytest.fixture(scope="session")
def default_run(request, tmp_path_factory, default_config) -> Path:
    """The embedded default config run once with Snakemake (``--cores 2``, unserved: as ``make demo`` runs it);
    returns the working directory. Its wall time is kept in the session's stash (``DEFAULT_RUN_SECONDS``): the
    SLURM test prints its own against it.

    Its jobs' file accesses are logged beside it (``small_workflow.audit_log_dir``): the file-access audit reads them.

    Under pytest-xdist the run is shared by the workers (their common base folder, under a lock): the first
    worker to ask runs it, the others wait for it and read the same folder."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        return _run_default(request, tmp_path_factory.mktemp("default-run"), default_config)
    shared = tmp_path_factory.getbasetemp().parent
    with open(shared / "default-run.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        workdir, done = shared / "default-run", shared / "default-run.done"
        if not done.exists():
            shutil.rmtree(workdir, ignore_errors=True)
            shutil.rmtree(f"{workdir}-audit", ignore_errors=True)
            workdir.mkdir()
            _run_default(request, workdir, default_config)
            done.touch()
    return workdir


def _run_default(request, workdir: Path, config: dict) -> Path:
    write_config(workdir, config)
    started = time.monotonic()
    # as `make demo` runs it: every job a process of its own, each logging the files it opens (test_file_access.py)
    snakemake(workdir, served=False, env=audit_env(audit_log_dir(workdir)))
    request.config.stash[DEFAULT_RUN_SECONDS] = time.monotonic() - started
    return workdir


@pytest.fixture
def workdir_copy(default_run, tmp_path) -> Path:
    """A private copy of the finished default run (results, metadata and config)."""
    target = tmp_path / "run"
    shutil.copytree(default_run, target, symlinks=True)
    return target
