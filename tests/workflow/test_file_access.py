"""Every job reads only its declared inputs and writes only its declared outputs (issue 47, part 1).

The small workflow of tests/small_workflow.py (a labelled benchmark of a precomputed file, a retrieval benchmark whose
score fans out over gallery halves) runs once with every job process watched (file_audit/sitecustomize.py: Python's
``open``, folder listings and renames, and ``h5py.File``). Each process is matched to its job by its command line
(Snakemake's metadata records each job's shell line, inputs and log); what it touched must be a declared input, a
declared output or log (or its temporary name or folder), the Python environment, the system or the package.
"""

from __future__ import annotations

import base64
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from small_workflow import AUDIT_HOOK
from workflow_support import REPO

# Reads no rule can declare yet, each with its reason. Anything else undeclared fails the test.
KNOWN = {
    # the report's costs: Snakemake's benchmark records of its candidates' jobs (vertebrae.reports.costs)
    ("report", "results/benchmarks"),
    # the pages of the whole out folder, whichever config wrote them (docs/workflow.md, "The out folder")
    ("leaderboard_page", "results"),
    ("results_index", "results"),
}
# Caches that only save time: read when present, their absence changes no result.
CACHES = ("results/.vertebrae/digests.json",)


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
    """The Python environment, the system, the package itself (and its editable-install hook), the user's caches
    of fonts (matplotlib)."""
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, "/usr", "/etc", "/proc", "/sys", "/dev", "/lib", "/opt",
             str(REPO / "vertebrae"), str(AUDIT_HOOK), str(Path.home() / ".cache" / "matplotlib")}
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots) or "__editable__" in path


def undeclared(root: Path) -> set[tuple[str, str, str]]:
    """(rule, kind, path relative to the working folder) of every undeclared file access of the run's jobs."""
    jobs, found = declared_jobs(root), set()
    for log in (root / "audit").glob("*.jsonl"):
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
            if kind == "r" and (path in inputs or any(path.startswith(p + "/") for p in inputs | outputs)):
                continue
            if path in folders and kind == "r":  # an output's folder, opened to sync the rename
                continue
            found.add((job["rule"], kind, os.path.relpath(path, root)))
    return found


def test_every_job_reads_only_its_declared_inputs(audited_small_run):
    found = undeclared(audited_small_run)
    known = {(rule, kind, path) for rule, kind, path in found
             if any(rule == r and (path == p or path.startswith(p + "/")) for r, p in KNOWN) or path in CACHES}
    assert found - known == set()
    # the checker sees what it should: the data files and HDF5 artifacts are read, declared
    seen = {json.loads(line)["path"] for log in (audited_small_run / "audit").glob("*.jsonl")
            for line in log.read_text(encoding="utf-8").splitlines()[1:]}
    assert str(audited_small_run / "data" / "rows.npz") in seen and str(audited_small_run / "emb" / "qa_gallery.h5") in seen
    assert any(path.endswith(".h5") and "/results/embeddings/" in path for path in seen)


def test_the_data_files_are_declared_inputs(audited_small_run):
    jobs = declared_jobs(audited_small_run).values()
    by_rule: dict[str, set[str]] = {}
    for job in jobs:
        by_rule.setdefault(job["rule"], set()).update(job["inputs"])
    assert {"data/rows.npz", "emb/a.npz"} <= by_rule["embed_shard"]
    assert {"data/pair.npz", "data/qrels.tsv", "emb/qa_query.npz", "emb/qa_gallery.h5"} <= by_rule["plan"]
    assert {"data/pair.npz", "data/qrels.tsv"} <= by_rule["write_retrieval_relevance"]
    assert any(p.endswith(".h5") for p in by_rule["score_retrieval_partial"])


def test_a_touched_data_file_reruns_nothing(audited_small_run):
    """The data files are declared ``ancient``: their bytes are in the fingerprints, so a touch reruns nothing."""
    os.utime(audited_small_run / "data" / "rows.npz")
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory",
                           str(audited_small_run), "--configfile", str(audited_small_run / "config.yaml"),
                           "--cores", "1", "-n"], cwd=audited_small_run, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Nothing to be done" in proc.stdout + proc.stderr
