"""``vertebrae run``'s job server (vertebrae/job_server.py): served jobs behave as their own processes would.

A real server (``job_server``, as ``vertebrae run`` starts it) and real ``vertebrae`` clients: exit status and
streams as unserved, signals forwarded to the job, a killed client's job killed, a declined subcommand left to its
client, a server whose ``vertebrae run`` is gone ending itself; and a real ``vertebrae run`` whose reports equal a run
with the server off, its score jobs served (their benchmark records show the thin client's memory).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import psutil
import pytest
import yaml

from vertebrae.core.job_client import SERVER_ENV, receive_message, send_message, server_path
from vertebrae.job_server import SERVED
from vertebrae.cli.serving import serving
from workflow_support import BIN, USER_CONFIG, comparable

VERTEBRAE = str(BIN / "vertebrae")
SUMMARY = ["summary", "--output-csv", "s.csv", "--output-markdown", "s.md", "--output-json", "s.json"]


def _env(**extra: str) -> dict[str, str]:
    return dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", **extra)


@pytest.fixture(scope="module")
def served():
    """A running server (as `vertebrae run` starts one: ``serving``) and the environment that names it; its process."""
    with serving(_env()) as environ:
        assert SERVER_ENV in environ
        server = next(p for p in psutil.Process().children()  # this one: the process may run others (workflow_support)
                      if p.cmdline()[-3:-1] == ["vertebrae.job_server", server_path(environ)])
        yield environ, server


def _wait(predicate, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_status_and_streams_as_unserved(served, tmp_path):
    environ, _ = served
    for argv in (["plan", "--help"], [*SUMMARY, "missing.json"], ["score", "--no-such-option"]):
        here = subprocess.run([VERTEBRAE, *argv], cwd=tmp_path, env=_env(), capture_output=True, text=True)
        there = subprocess.run([VERTEBRAE, *argv], cwd=tmp_path, env=environ, capture_output=True, text=True)
        assert (there.returncode, there.stdout, there.stderr) == (here.returncode, here.stdout, here.stderr), argv
    assert here.returncode == 2 and "vertebrae score: error" in here.stderr


def test_signals_reach_the_job_and_a_killed_client_takes_it(served, tmp_path):
    environ, server = served
    for end in ("terminate", "kill"):
        fifo = tmp_path / f"{end}.json"
        os.mkfifo(fifo)  # the job blocks opening it: a served job that is still running
        client = subprocess.Popen([VERTEBRAE, *SUMMARY, fifo.name], cwd=tmp_path, env=environ)
        assert _wait(lambda: server.children()), "no job was forked"
        job = server.children()[0]
        # the forked job moves to the client's folder first thing; a look right after the fork may come before that
        assert _wait(lambda: job.cwd() == str(tmp_path)), job.cwd()
        getattr(client, end)()
        assert client.wait(timeout=30) == (-signal.SIGTERM if end == "terminate" else -signal.SIGKILL)
        assert _wait(lambda: not job.is_running() or job.status() == psutil.STATUS_ZOMBIE), f"{end}: job left running"
        assert _wait(lambda: not server.children()), f"{end}: job not reaped"


def test_declined_and_unreachable_leave_the_job_to_its_client(served, tmp_path):
    environ, _ = served
    assert "embed-shard" not in SERVED and "compress" not in SERVED and "run" not in SERVED
    # no compress job is served: each measures its own peak memory, which in a fork of the server would be the server's
    assert not {"compress", "compress-retrieval", "compress-zero-shot"} & SERVED
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(server_path(environ))
        send_message(sock, {"argv": ["embed-shard", "--help"], "cwd": str(tmp_path), "env": {}, "prefix": sys.prefix},
                     (0, 1, 2))
        assert receive_message(sock)[0] == {"served": False}
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:  # another environment's vertebrae (conda env)
        sock.connect(server_path(environ))
        send_message(sock, {"argv": ["plan", "--help"], "cwd": str(tmp_path), "env": {}, "prefix": "/opt/other"},
                     (0, 1, 2))
        assert receive_message(sock)[0] == {"served": False}
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:  # another vertebrae (a checkout on PYTHONPATH)
        sock.connect(server_path(environ))
        send_message(sock, {"argv": ["plan", "--help"], "cwd": str(tmp_path), "env": {}, "prefix": sys.prefix,
                            "path": list(sys.path), "package": str(tmp_path / "vertebrae")}, (0, 1, 2))
        assert receive_message(sock)[0] == {"served": False}
    gone = dict(environ, **{SERVER_ENV: environ[SERVER_ENV] + "-gone"})
    proc = subprocess.run([VERTEBRAE, "plan", "--help"], cwd=tmp_path, env=gone, capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.startswith("usage: vertebrae plan")


def test_a_served_job_imports_what_its_own_process_would(tmp_path, monkeypatch):
    """A job's import path is its own, not the server's: a config-declared callable from a module on the job's
    PYTHONPATH (a folder the server, started earlier, never had) is found; a module of the same name in the folder
    the server was started in is not, as the job's own process would not find it there either."""
    from vertebrae.planning import plan
    from workflow.test_zero_shot_workflow import ENCODERS, _config

    work, decoy = tmp_path / "work", tmp_path / "decoy"
    for folder in (work / "data", work / "mods", decoy):
        folder.mkdir(parents=True)
    (work / "mods" / "zs_wf_encoders.py").write_text(ENCODERS)
    (work / "data" / "toy.csv").write_text("id,f0,label\n" + "".join(
        f"s{i},{i * 0.5},{('alpha', 'beta', 'gamma')[i % 3]}\n" for i in range(12)))
    monkeypatch.chdir(work)
    with monkeypatch.context() as here:
        here.syspath_prepend(str(work / "mods"))  # planning here imports the callables too
        workflow_plan = plan(_config([{"label": name, "texts": [f"a {name}"]} for name in ("alpha", "beta", "gamma")]))
    workflow_plan.write_spec_files(work)
    (fp,) = [fp for fp in workflow_plan.planned() if workflow_plan.spec(fp)["stage"] == "zero-shot-embed"
             and workflow_plan.spec(fp).get("protocol") is None]  # the samples' plan: it resolves the callable
    argv = [VERTEBRAE, "plan-zero-shot", "--spec-file", workflow_plan.spec_file(fp), "--output"]
    with_path = {"PYTHONPATH": str(work / "mods")}
    (decoy / "zs_wf_encoders.py").write_text("raise SystemExit('the server folder was searched')\n")
    monkeypatch.chdir(decoy)  # the server starts here (python -m puts its folder first on its own path)
    with serving(_env()) as environ:
        monkeypatch.chdir(work)
        own = subprocess.run([*argv, "own.json"], cwd=work, env=_env(**with_path), capture_output=True, text=True)
        there = subprocess.run([*argv, "served.json"], cwd=work, env=dict(environ, **with_path), capture_output=True,
                               text=True)
        assert own.returncode == 0, own.stderr
        assert there.returncode == 0, there.stderr
        assert (work / "served.json").read_bytes() == (work / "own.json").read_bytes()
        for name, env in (("own", _env()), ("served", environ)):  # on no PYTHONPATH: found by neither
            proc = subprocess.run([*argv, f"{name}-2.json"], cwd=work, env=env, capture_output=True, text=True)
            assert proc.returncode != 0 and "No module named 'zs_wf_encoders'" in proc.stderr, (name, proc.stderr)


def test_a_server_is_used_only_on_its_host_and_in_its_allocation():
    path = "/tmp/x/socket"
    host = socket.gethostname()
    assert server_path({SERVER_ENV: f"{host}::{path}"}) == path
    assert server_path({SERVER_ENV: f"{host}:17:{path}", "SLURM_JOB_ID": "17"}) == path
    assert server_path({SERVER_ENV: f"{host}::{path}", "SLURM_JOB_ID": "17"}) is None  # a SLURM job: not its own
    assert server_path({SERVER_ENV: f"{host}:17:{path}", "SLURM_JOB_ID": "18"}) is None
    assert server_path({SERVER_ENV: f"other-{host}::{path}"}) is None
    assert server_path({SERVER_ENV: "off"}) is None and server_path({}) is None
    # a job in an Apptainer / Singularity container (the host's /tmp bound in): it runs in its image
    assert server_path({SERVER_ENV: f"{host}::{path}", "APPTAINER_CONTAINER": "/images/vertebrae.sif"}) is None
    assert server_path({SERVER_ENV: f"{host}::{path}", "SINGULARITY_CONTAINER": "/images/vertebrae.sif"}) is None


def test_a_server_ends_when_its_run_is_gone(tmp_path):
    socket_path = tmp_path / "socket"
    # the server's parent (sh) exits at once: the server must not outlive it
    parent = subprocess.Popen(["sh", "-c", f'"{sys.executable}" -m vertebrae.job_server "{socket_path}" $$ & echo $!'],
                              stdout=subprocess.PIPE, text=True, env=_env())
    pid = int(parent.stdout.readline())
    parent.wait(timeout=30)
    assert _wait(lambda: not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE, 60)


def test_a_served_run_equals_an_unserved_one(tmp_path):
    """`vertebrae run` with VERTEBRAE_JOB_SERVER=off, then again with the server forcing every score job (and all
    after it) to rerun: equal reports; the rerun score jobs were served (their Snakemake benchmark records measured
    the client: a fraction of an unserved score job's memory)."""
    config = dict(USER_CONFIG, embedding={"batch_size": 50, "shards": 1})
    config["benchmarks"] = {"my_iris": dict(USER_CONFIG["benchmarks"]["my_iris"],
                                            compression=[{"method": "pca", "n_components": 2}])}
    (tmp_path / "my.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    report = tmp_path / "results/reports/my_iris/report.json"
    reports, memory = {}, {}
    for mode, env, extra in (("off", _env(**{SERVER_ENV: "off"}), []), ("served", _env(), ["--forcerun", "score"])):
        proc = subprocess.run([VERTEBRAE, "run", "my.yaml", "--cores", "2", *extra], cwd=tmp_path, env=env,
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        records = sorted((tmp_path / "results" / "benchmarks" / "score").glob("*.tsv"))
        assert len(records) == 2, records
        memory[mode] = max(float(p.read_text().splitlines()[1].split("\t")[2]) for p in records)
        reports[mode] = json.loads(report.read_text(encoding="utf-8"))
    assert memory["served"] < memory["off"] / 3, memory
    assert comparable(reports["served"]) == comparable(reports["off"])


def test_a_dry_run_starts_no_server():
    from vertebrae.cli.commands import _dry_run

    assert all(_dry_run(args) for args in (["-n"], ["--cores", "2", "-np"], ["--dry-run"], ["--dryrun", "-q"]))
    assert not any(_dry_run(args) for args in ([], ["--cores", "2"], ["-j4"], ["--profile", "slurm"], ["--notemp"]))
