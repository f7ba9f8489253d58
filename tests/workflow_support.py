"""Helpers to run the real Snakemake workflow in a temporary working directory (tests only)."""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest
import yaml

from vertebrae.cli.commands import _dry_run
from vertebrae.cli.serving import serving
from vertebrae.core.job_client import SERVER_ENV

REPO = Path(__file__).resolve().parents[1]


def snakemake(workdir: Path, *args: str, check: bool = True, served: bool = True,
              env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run ``python -m snakemake`` on the repository's Snakefile inside ``workdir``.

    ``served``: the jobs run as under ``vertebrae run``, their scoring and bookkeeping subcommands handed to a warm
    job server (:func:`job_server_env`; one per test process, started on first use); ``served=False`` runs every job
    in a process of its own, as ``snakemake`` started directly (``make demo``, the default run) does. A dry run
    starts no job, so it is never served. ``env``: variables added to the jobs' environment (the file-access
    audit's)."""
    extra = env or {}
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    if served and not _dry_run(list(args)):
        env.update(job_server_env())
    env.update(extra)
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir),
           "--cores", "2", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=workdir)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}")
    return proc


_SERVED: list[dict[str, str]] = []  # this test process's job server, as the environment naming it
_SERVER_STACK = contextlib.ExitStack()


def job_server_env() -> dict[str, str]:
    """``{VERTEBRAE_JOB_SERVER: ...}`` naming this test process's job server (``vertebrae.cli.serving``, the one
    ``vertebrae run`` starts), started on first use and stopped when the process exits; empty where it could not
    start or ``VERTEBRAE_JOB_SERVER=off`` asks for none (then jobs run unserved, as under ``vertebrae run``)."""
    if not _SERVED:
        environ = _SERVER_STACK.enter_context(serving(dict(os.environ)))
        atexit.register(_SERVER_STACK.close)
        _SERVED.append({SERVER_ENV: environ[SERVER_ENV]} if SERVER_ENV in environ else {})
    return dict(_SERVED[0])


DEFAULT_RUN_SECONDS = pytest.StashKey[float]()  # the session's local default run, wall seconds (workflow/conftest)
BIN = Path(sys.executable).parent  # the test environment's bin folder (.venv/bin): snakemake, vertebrae
# A user's own small config (tests/workflow/test_user_config.py, test_slurm.py). Its 4 shards (150 rows / 25 = 6
# batches) apply alone; deep-merged into the demo config, the demo's `shards: 2` would not (the schema's default,
# "auto", would plan this small endpoint as one shard). Iris's 3 classes make the score job resample rows for the
# comparison, one OverlapIndex fit per subsample: 20 (the least), not the default 200, which no test reads.
USER_CONFIG = {
    "seed": 0,
    "embedding": {"batch_size": 25, "shards": 4},
    "benchmarks": {"my_iris": {
        "dataset": {"source": {"type": "sklearn", "name": "iris"},
                    "identity": {"kind": "declared", "name": "my-iris", "revision": "1"}},
        "extractors": {"raw": {"type": "precomputed"}},
        "scoring": {"k": 5},
        "row_resampling": {"resamples": 20},
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


def dry_run_jobs(dry_run_stdout: str) -> list[tuple[str, list[str]]]:
    """(rule, outputs) of every job ``snakemake -n`` lists, in its order."""
    jobs, rule = [], None
    for line in dry_run_stdout.splitlines():
        found = re.match(r"^(?:local)?rule (\w+):", line)
        if found:
            rule = found.group(1)
        elif rule and line.strip().startswith("output:"):
            jobs.append((rule, [path.strip() for path in line.split(":", 1)[1].split(",")]))
            rule = None
    return jobs


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


# (and report.json's content_hash, a hash over the rest, timings included; each candidate's measured cost; and its
# metadata's "software": the vertebrae version and git revision that wrote it, which an in-process report has not
# and a wheel's run has without the git keys)
TIMING_KEYS = ("timings", "cost", "runtime", "runtime_seconds", "total_seconds", "content_hash", "software")


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


def three_files_config(root: Path) -> dict:
    """Issue 18's Done-when config: three precomputed embedding files compared in one labelled benchmark and three
    per-endpoint pairs in one retrieval benchmark, written under ``root`` (paths in the config are relative to it).

    Labelled ``models``: 90 rows of 3 classes (data/rows.npz with ids), candidates ``a`` (an .npz with an ids
    member), ``b`` (an .h5 dataset with byte-string ids) and ``c`` (an .npy with a one-per-line ids file), 8 dims each,
    every file's rows in its own order. Retrieval ``search``: 30 queries x 60 gallery items of 3 topics with a qrels
    file; candidates ``qa`` (npz query + h5 gallery), ``qb`` (npy + ids query, npz gallery) and ``qc`` (h5 query, npy
    without ids gallery, in the dataset's order). No identity is declared: the data and every file are tracked by
    content. Every file is dated a minute back (past the content-digest cache's racy window, as a user's files are)."""
    rng = np.random.default_rng(18)
    data, emb = root / "data", root / "emb"
    data.mkdir(parents=True, exist_ok=True)
    emb.mkdir(parents=True, exist_ok=True)
    n, dim = 90, 8
    ids = np.array([f"row-{i:02d}" for i in range(n)])
    labels = np.arange(n) % 3
    np.savez(data / "rows.npz", embeddings=np.zeros((n, 1), np.float32), labels=labels, ids=ids)

    def labelled(spread: float) -> np.ndarray:
        return (spread * rng.normal(size=(3, dim))[labels] + rng.normal(size=(n, dim))).astype(np.float32)

    order = rng.permutation(n)
    np.savez(emb / "a.npz", embeddings=labelled(3.0)[order], ids=ids[order])
    with h5py.File(emb / "b.h5", "w") as handle:
        handle["vectors"] = labelled(1.5)[order[::-1]]
        handle["row_ids"] = ids[order[::-1]].astype("S")
    np.save(emb / "c.npy", labelled(0.5)[order])
    (emb / "c_ids.txt").write_text("".join(f"{i}\n" for i in ids[order]), encoding="utf-8")

    n_q, n_g = 30, 60
    q_ids, g_ids = np.array([f"q{i:02d}" for i in range(n_q)]), np.array([f"g{i:02d}" for i in range(n_g)])
    q_topic, g_topic = np.arange(n_q) % 3, np.arange(n_g) % 3
    np.savez(data / "pair.npz", queries=np.zeros((n_q, 1)), gallery=np.zeros((n_g, 1)), query_ids=q_ids,
             gallery_ids=g_ids)
    (data / "qrels.tsv").write_text("".join(f"{q_ids[q]}\t{g_ids[g]}\t1\n" for q in range(n_q) for g in range(n_g)
                                            if q_topic[q] == g_topic[g]), encoding="utf-8")

    def pair(noise: float) -> tuple[np.ndarray, np.ndarray]:
        topics = rng.normal(size=(3, dim))
        return ((topics[q_topic] + noise * rng.normal(size=(n_q, dim))).astype(np.float32),
                (topics[g_topic] + noise * rng.normal(size=(n_g, dim))).astype(np.float32))

    q_order, g_order = rng.permutation(n_q), rng.permutation(n_g)
    query, gallery = pair(0.3)
    np.savez(emb / "qa_query.npz", embeddings=query[q_order], ids=q_ids[q_order])
    with h5py.File(emb / "qa_gallery.h5", "w") as handle:
        handle["emb"] = gallery[g_order]
        handle["ids"] = g_ids[g_order].astype("S")
    query, gallery = pair(0.8)
    np.save(emb / "qb_query.npy", query[q_order[::-1]])
    (emb / "qb_query_ids.txt").write_text("".join(f"{i}\n" for i in q_ids[q_order[::-1]]), encoding="utf-8")
    np.savez(emb / "qb_gallery.npz", embeddings=gallery[g_order[::-1]], ids=g_ids[g_order[::-1]])
    query, gallery = pair(1.5)
    with h5py.File(emb / "qc_query.h5", "w") as handle:
        handle["emb"] = query[q_order]
        handle["ids"] = q_ids[q_order].astype("S")
    np.save(emb / "qc_gallery.npy", gallery)  # no ids: the dataset's gallery rows in order

    back = time.time() - 60
    for path in (*data.iterdir(), *emb.iterdir()):
        os.utime(path, (back, back))
    return {
        "seed": 0,
        "embedding": {"shards": 1, "batch_size": 128},
        "benchmarks": {"models": {
            "dataset": {"source": {"type": "npz", "path": "data/rows.npz", "ids_key": "ids"}},
            "extractors": {
                "a": {"type": "precomputed", "path": "emb/a.npz", "key": "embeddings", "ids": "ids"},
                "b": {"type": "precomputed", "path": "emb/b.h5", "dataset": "vectors", "ids": "row_ids"},
                "c": {"type": "precomputed", "path": "emb/c.npy", "ids_path": "emb/c_ids.txt"},
            },
            "scoring": {"k": 5},
        }},
        "retrieval": {"search": {
            "dataset": {"source": {"type": "npz_pair", "path": "data/pair.npz", "relevance_path": "data/qrels.tsv"}},
            "extractors": {
                "qa": {"type": "precomputed", "files": {
                    "query": {"path": "emb/qa_query.npz", "key": "embeddings", "ids": "ids"},
                    "gallery": {"path": "emb/qa_gallery.h5", "dataset": "emb", "ids": "ids"}}},
                "qb": {"type": "precomputed", "files": {
                    "query": {"path": "emb/qb_query.npy", "ids_path": "emb/qb_query_ids.txt"},
                    "gallery": {"path": "emb/qb_gallery.npz", "key": "embeddings", "ids": "ids"}}},
                "qc": {"type": "precomputed", "files": {
                    "query": {"path": "emb/qc_query.h5", "dataset": "emb", "ids": "ids"},
                    "gallery": "emb/qc_gallery.npy"}},
            },
        }},
    }
