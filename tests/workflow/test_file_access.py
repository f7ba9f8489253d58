"""Every job reads only its declared inputs and writes only its declared outputs (issue 47, part 1).

The default workflow (config/config.yaml, the shared ``default_run``: labelled, regression, text, zero-shot and
retrieval benchmarks, a retrieval score fanned out over gallery halves, real offline models) runs with every job
process watched (file_audit/sitecustomize.py: Python's ``open``, folder listings and renames, and ``h5py.File``).
Each process is matched to its job by its command line (Snakemake's metadata records each job's shell line, inputs
and log); what it touched must be a declared input, a declared output or log (or its temporary name or folder), the
Python environment, the system or the package.

Precomputed files named by a config (npz, HDF5, a relevance table) are declared the same way (``data_files``,
tests/planning/test_job_files.py); the object-storage test runs such a config with no shared working folder, where a
job that read an undeclared file would fail.
"""

from __future__ import annotations

import base64
import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from small_workflow import AUDIT_HOOK, audit_log_dir
from workflow_support import REPO

# Reads no rule can declare, each with its reason. Anything else undeclared fails the test.
# None left: the pages of the whole out folder read the reports their plan lists, declared (docs/workflow.md); the
# run's caches (OUT/.vertebrae/digests.json, checks/) serve planning only: no job reads or writes them.
KNOWN: set[tuple[str, str]] = set()


def declared_jobs(root: Path) -> dict[tuple[str, ...], dict]:
    """Each job by its command line (before the log redirection): its rule, declared inputs and outputs + logs."""
    jobs: dict[tuple[str, ...], dict] = {}
    for record in (root / ".snakemake" / "metadata").iterdir():
        output = base64.b64decode(record.name.replace("@", "/")).decode()
        meta = json.loads(record.read_text(encoding="utf-8"))
        argv = tuple(shlex.split(meta["shellcmd"].split(" > ")[0]))
        job = jobs.setdefault(argv, {"rule": meta["rule"], "inputs": set(), "outputs": set()})
        job["inputs"].update(meta["input"])
        job["outputs"].update([output, *meta["log"]])
    return jobs


def allowed(path: str) -> bool:
    """The Python environment (the default's text model ships as a package: its weights are in site-packages), the
    system (the system's temporary folder included: Snakemake's ``tmpdir`` of each job, where dill writes a scratch
    file at import), the package itself (and its editable-install hook), the user's caches of fonts (matplotlib)."""
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, "/usr", "/etc", "/proc", "/sys", "/dev", "/lib", "/opt",
             str(REPO / "vertebrae"), str(AUDIT_HOOK), str(Path.home() / ".cache" / "matplotlib")}
    return (any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots) or "__editable__" in path
            or os.path.dirname(path) == tempfile.gettempdir())  # a file right in it: the runs' own folders are below


def undeclared(root: Path, logs: Path) -> set[tuple[str, str, str]]:
    """(rule, kind, path relative to the working folder) of every undeclared file access of the run's jobs, whose
    processes logged them under ``logs``."""
    jobs, found = declared_jobs(root), set()
    for log in logs.glob("*.jsonl"):
        lines = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
        argv = ("vertebrae", *lines[0]["argv"])
        assert argv in jobs, f"a vertebrae process that is no job's: {argv}"
        job = jobs[argv]
        inputs = {str(root / p) for p in job["inputs"]}
        outputs = {str(root / p) for p in job["outputs"]}
        folders = {os.path.dirname(p) for p in outputs}
        for event in lines[1:]:
            path, kind = event["path"], event["kind"]
            if allowed(path):
                continue
            if path in outputs or os.path.dirname(path) in folders and kind != "d" and (
                    kind == "w" or os.path.basename(path).startswith(".")):  # a temporary name beside an output
                continue
            if kind != "d" and (any(path.startswith(p + "/") for p in outputs)
                                or any(path.startswith(f + "/.") for f in folders)):
                continue  # inside a folder output (Snakemake's directory()), or a temporary folder beside an output
            if kind == "r" and (path in inputs or any(path.startswith(p + "/") for p in inputs | outputs)):
                continue
            if path in folders and kind == "r":  # an output's folder, opened to sync the rename
                continue
            found.add((job["rule"], kind, os.path.relpath(path, root)))
    return found


def known(found: set[tuple[str, str, str]]) -> set[tuple[str, str, str]]:
    """The accesses of ``found`` that KNOWN allows."""
    return {(rule, kind, path) for rule, kind, path in found
            if any(rule == r and (path == p or path.startswith(p + "/")) for r, p in KNOWN)}


@pytest.fixture(scope="module")
def audit_logs(default_run) -> Path:
    logs = audit_log_dir(default_run)
    assert len(list(logs.glob("*.jsonl"))) > 50, "the default run's jobs logged nothing: is the hook installed?"
    return logs


def test_every_job_of_the_default_workflow_reads_only_its_declared_inputs(default_run, audit_logs):
    found = undeclared(default_run, audit_logs)
    assert found - known(found) == set()
    # the checker sees what it should: the data file, the HDF5 artifacts and the fanned-out partial scores are read
    seen = {(json.loads(line)["path"], json.loads(line)["kind"]) for log in audit_logs.glob("*.jsonl")
            for line in log.read_text(encoding="utf-8").splitlines()[1:]}
    assert (str(default_run / "config" / "data" / "topics.csv"), "r") in seen
    assert any(kind == "r" and path.endswith(".h5") and "/results/embeddings/" in path for path, kind in seen)
    assert any(kind == "r" and "/results/retrieval/partials/" in path for path, kind in seen)
    # the exceptions are the rule's own: a record read by another job, a plan file by the report, are not allowed
    assert known({("plan", "r", "results/benchmarks/score/x.tsv"), ("report", "r", "results/plans/x.json")}) == set()


def test_the_data_files_are_declared_ancient_inputs(default_run):
    """The default's text corpus is an input of every job that reads it; ``ancient``: its bytes are in the
    fingerprints, so a touch reruns nothing."""
    by_rule: dict[str, set[str]] = {}
    for job in declared_jobs(default_run).values():
        by_rule.setdefault(job["rule"], set()).update(job["inputs"])
    for rule in ("plan", "embed_shard", "embed_retrieval_shard", "write_protocol", "write_retrieval_relevance",
                 "plan_zero_shot", "write_zero_shot_protocol"):
        assert "config/data/topics.csv" in by_rule[rule], rule
    corpus = default_run / "config" / "data" / "topics.csv"
    before = corpus.stat()
    try:
        os.utime(corpus)
        proc = subprocess.run([sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"),
                               "--directory", str(default_run), "--cores", "1", "-n"], cwd=default_run,
                              capture_output=True, text=True)
    finally:
        os.utime(corpus, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Nothing to be done" in proc.stdout + proc.stderr
