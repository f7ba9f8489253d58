"""The default workflow through the SLURM profile on a real single-node cluster; its reports equal a local run's.

The cluster (munge, slurmctld, slurmd; profiles/slurm/localhost/cluster.sh) is started once per test session and
stopped afterwards unless it was already running (``.ci/run`` starts it itself). The profile is written the way
the docs tell users (``vertebrae profile slurm --account --partition`` into a private XDG config home: no checkout
needed), and the run uses it by name:
``snakemake --profile slurm --profile profiles/slurm/localhost``.

Starting the cluster installs packages (apt, as root) and starts daemons on this machine, so the test runs only
when asked: ``make test-slurm`` or VERTEBRAE_SLURM=1; ``make test`` skips it without touching SLURM. Asked and
without SLURM (no root, no apt) it is skipped, unless VERTEBRAE_REQUIRE_SLURM=1 (as in .ci/run, which asks and
requires) turns that into a failure.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml

from workflow_support import (BIN, DEFAULT_RUN_SECONDS, REPO, USER_CONFIG, clone_workflow, comparable, job_counts, three_files_config,
                              unactivated_env, write_config, written_report)

CLUSTER = REPO / "profiles" / "slurm" / "localhost" / "cluster.sh"
# rule -> job group of the site profile: such jobs are submitted together, one SLURM job per connected chain
GROUPS = yaml.safe_load((REPO / "profiles/slurm/config.yaml").read_text(encoding="utf-8"))["groups"]


def _submissions(stdout: str) -> Counter:
    """SLURM submissions by rule, and by ``group:<name>`` for a job group (the plugin's log folder names them)."""
    found = re.findall(r"submitted with SLURM jobid \d+ \(log: \S*/slurm_logs/(rule|group)_(\w+)/", stdout)
    groups = set(GROUPS.values())  # a group's folder is group_<group>_<its rules>

    def group(folder: str) -> str:
        return next(f"group:{g}" for g in groups if folder == g or folder.startswith(f"{g}_"))

    return Counter(name if kind == "rule" else group(name) for kind, name in found)


def _ran(workdir: Path) -> Counter:
    """Jobs that ran, by rule: each leaves its benchmark record (results/benchmarks/<rule>/...)."""
    return Counter(p.relative_to(workdir / "results" / "benchmarks").parts[0] for p in (workdir / "results" / "benchmarks").rglob("*.tsv"))


def _check_grouped(submitted: Counter, planned: Counter, workdir: Path) -> None:
    """No grouped rule was submitted alone; every grouped job ran, in fewer SLURM jobs than jobs."""
    grouped = set(GROUPS) & set(planned)
    assert grouped and not grouped & set(submitted), submitted
    ran = _ran(workdir)
    assert all(ran[rule] == planned[rule] for rule in grouped), (ran, planned)
    groups = sum(n for name, n in submitted.items() if name.startswith("group:"))
    assert 0 < groups < sum(planned[rule] for rule in grouped), (submitted, planned)
WORKFLOW_TIMEOUT_S = int(os.environ.get("VERTEBRAE_SLURM_TIMEOUT", "3000"))
REQUIRED = os.environ.get("VERTEBRAE_REQUIRE_SLURM") == "1"
ASKED = REQUIRED or os.environ.get("VERTEBRAE_SLURM") == "1"
NOT_ASKED = ("not asked for: this test installs SLURM and munge (apt, as root) and starts their daemons on this "
             "machine; run it with `make test-slurm` or VERTEBRAE_SLURM=1 (.ci/run does)")

# decided before any fixture runs: without asking, nothing here touches cluster.sh, apt or the default run
pytestmark = pytest.mark.skipif(not ASKED, reason=NOT_ASKED)


def _run(cmd: list[str], *, cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    """Run ``cmd`` in its own process group; on timeout SIGKILL the whole group (snakemake and its local jobs)."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        raise AssertionError(f"{' '.join(cmd[:4])} ... killed after {timeout} s:\n{out[-6000:]}") from None
    return subprocess.CompletedProcess(cmd, proc.returncode, out, "")


@pytest.fixture(scope="session")
def slurm_cluster():
    """A running single-node SLURM cluster for the whole session; yields the seconds its start took."""
    try:
        was_running = subprocess.run([str(CLUSTER), "status"], capture_output=True, timeout=60).returncode == 0
    except subprocess.TimeoutExpired:
        was_running = False
    started = time.monotonic()
    try:
        proc = subprocess.run([str(CLUSTER), "start"], capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        proc = subprocess.CompletedProcess([], 1, "", "cluster.sh start timed out after 300 s")
    seconds = time.monotonic() - started
    if proc.returncode != 0:
        message = f"no SLURM cluster: {proc.stderr.strip()[-2000:]}"
        if REQUIRED:
            pytest.fail(message)
        pytest.skip(message)
    yield seconds
    if not was_running:
        try:
            subprocess.run([str(CLUSTER), "stop"], capture_output=True, timeout=120)
        except subprocess.TimeoutExpired:
            pass


def test_default_workflow_on_slurm_equals_local_run(slurm_cluster, default_run, default_config, tmp_path, request):
    config_home = tmp_path / "xdg"
    env = dict(os.environ, XDG_CONFIG_HOME=str(config_home),
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    install = subprocess.run([str(BIN / "vertebrae"), "profile", "slurm", "--account", "root", "--partition", "debug"],
                             env=env, capture_output=True, text=True, timeout=30)
    assert install.returncode == 0, install.stderr
    assert (config_home / "snakemake/slurm/config.yaml").is_file()

    workdir = tmp_path / "run"
    write_config(workdir, default_config)
    snakemake = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir),
                 "--profile", "slurm", "--profile", str(REPO / "profiles/slurm/localhost")]
    planned = job_counts(_run([*snakemake, "-n", "--quiet", "rules"], cwd=workdir, env=env, timeout=300).stdout)
    started = time.monotonic()
    proc = _run(snakemake, cwd=workdir, env=env, timeout=WORKFLOW_TIMEOUT_S)
    seconds = time.monotonic() - started
    assert proc.returncode == 0, proc.stdout[-8000:]
    assert "Using profiles slurm" in proc.stdout or "Using profile" in proc.stdout

    # every job of a rule that is not a local bookkeeping rule was submitted to SLURM, once
    submitted = _submissions(proc.stdout)
    assert {"embed_shard", "fit_extractor", "group:post_embedding"} <= set(submitted), submitted
    assert all(submitted[rule] == planned[rule] for rule in submitted if not rule.startswith("group:")), (
        submitted, planned)
    assert not {"plan", "report", "figures"} & set(submitted)
    _check_grouped(submitted, planned, workdir)

    reports = sorted(p.relative_to(default_run) for p in (default_run / "results" / "reports").glob("*/report.json"))
    assert reports, "the local run wrote no report"
    for path in reports:
        on_slurm = json.loads((workdir / path).read_text(encoding="utf-8"))
        local = json.loads((default_run / path).read_text(encoding="utf-8"))
        assert comparable(on_slurm) == comparable(local), path
        assert (workdir / path).with_name("ranking.png").stat().st_size > 0
    local_seconds = request.config.stash[DEFAULT_RUN_SECONDS]
    print(f"\nSLURM: cluster start {slurm_cluster:.1f} s; default workflow on SLURM {seconds:.1f} s "
          f"({sum(planned.values())} jobs, {sum(submitted.values())} submitted to SLURM); local run {local_seconds:.1f} s "
          f"(--cores 2); slurm_to_local={seconds / local_seconds:.2f}")


def test_my_config_alone_on_slurm_without_an_activated_environment(slurm_cluster, tmp_path):
    """Issue 18, problems 1 and 2 on SLURM, run as the README says (from the repository root, the demo config
    there): `snakemake --profile slurm --configfile my-config.yaml`, with the environment's snakemake by its path and
    not activated. Every SLURM job plans from my-config.yaml alone (the shard files it plans are the main process's:
    4 shards, not the demo's 2) and finds `vertebrae`."""
    root = clone_workflow(tmp_path / "vertebrae", USER_CONFIG)
    env = unactivated_env(XDG_CONFIG_HOME=str(tmp_path / "xdg"))
    install = subprocess.run([str(BIN / "vertebrae"), "profile", "slurm", "--account", "root", "--partition", "debug"],
                             env=env, capture_output=True, text=True, timeout=30)
    assert install.returncode == 0, install.stderr
    snakemake = [str(BIN / "snakemake"), "--profile", "slurm", "--profile", "profiles/slurm/localhost",
                 "--configfile", "my-config.yaml"]
    planned = job_counts(_run([*snakemake, "-n", "--quiet", "rules"], cwd=root, env=env, timeout=300).stdout)
    assert planned["report"] == 1 and planned["embed_shard"] == 4, planned
    proc = _run(snakemake, cwd=root, env=env, timeout=WORKFLOW_TIMEOUT_S)
    assert proc.returncode == 0, proc.stdout[-8000:]
    submitted = _submissions(proc.stdout)
    assert submitted["embed_shard"] == 4 and submitted["group:post_embedding"] == 1, submitted  # merge + score
    _check_grouped(submitted, planned, root)
    assert sorted(p.name for p in (root / "results" / "reports").iterdir()) == ["my_iris"]
    report = json.loads((root / "results/reports/my_iris/report.json").read_text(encoding="utf-8"))
    assert report["dataset_summary"]["identity"] == "declared:my-iris@1"
    logs = [*(root / "results" / "logs").rglob("*.log"), *(root / ".snakemake" / "slurm_logs").rglob("*.log")]
    assert logs and not [p for p in logs if "command not found" in p.read_text(errors="replace")]


def test_three_precomputed_files_on_slurm(slurm_cluster, tmp_path):
    """Issue 18's Done-when on SLURM: the three-files config (three precomputed files in a labelled benchmark, three
    per-endpoint pairs in a retrieval benchmark) run with `vertebrae run my.yaml --profile slurm --profile
    profiles/slurm/localhost` from a fresh clone, the environment not activated; both reports equal a local run's."""
    local = tmp_path / "local"
    local.mkdir()
    config = three_files_config(local)
    (local / "my.yaml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    proc = _run([str(BIN / "vertebrae"), "run", "my.yaml", "--cores", "2"], cwd=local,
                env=dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"), timeout=WORKFLOW_TIMEOUT_S)
    assert proc.returncode == 0, proc.stdout[-8000:]

    root = clone_workflow(tmp_path / "vertebrae")
    assert three_files_config(root) == config
    (root / "my.yaml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    env = unactivated_env(XDG_CONFIG_HOME=str(tmp_path / "xdg"))
    install = subprocess.run([str(BIN / "vertebrae"), "profile", "slurm", "--account", "root", "--partition", "debug"],
                             env=env, capture_output=True, text=True, timeout=30)
    assert install.returncode == 0, install.stderr
    # --verbose: Snakemake's own output (the SLURM submissions it names) rather than the progress display
    run = [str(BIN / "vertebrae"), "run", "--verbose", "my.yaml", "--profile", "slurm", "--profile",
           "profiles/slurm/localhost"]
    planned = job_counts(_run([*run, "-n", "--quiet", "rules"], cwd=root, env=env, timeout=300).stdout)
    assert planned["embed_shard"] == 3 and planned["embed_retrieval_shard"] == 6 and planned["report"] == 2, planned
    proc = _run(run, cwd=root, env=env, timeout=WORKFLOW_TIMEOUT_S)
    assert proc.returncode == 0, proc.stdout[-8000:]
    submitted = _submissions(proc.stdout)
    assert submitted["embed_shard"] == 3 and submitted["embed_retrieval_shard"] == 6, submitted
    # one per candidate: a labelled merge + score, a retrieval pair's two merges + score
    assert submitted["group:post_embedding"] == 6, submitted
    _check_grouped(submitted, planned, root)
    for bench, candidates in (("models", ["a", "b", "c"]), ("search", ["qa", "qb", "qc"])):
        on_slurm, alone = written_report(root, bench), written_report(local, bench)
        assert sorted(on_slurm["ranking"]) == candidates, on_slurm["ranking"]
        assert comparable(on_slurm) == comparable(alone), bench
