"""Workflow scale and per-job overhead (a performance harness, not a test).

1. Dry run of a plan with more than 1,000 shard jobs (three precomputed-embedding datasets of 2,000 rows, 400
   shards each: the batch size is 2,000 / 400 = 5 rows, since an endpoint has at most ceil(rows / batch) shards): wall time of ``snakemake -n`` (Snakefile parse + planning + DAG), which must stay under 10 s.
2. Per-job overhead of a local run: a small real workflow (digits, one precomputed extractor in 16 shards, plain
   OverlapIndex scoring) run with ``--cores 1``; overhead = wall time / jobs run (the jobs do almost no work).
   Where it goes, all measured in this one run (the machine may be shared: compare rows with each other, not with
   another run): the jobs' own processes (the sum of their ``benchmark:`` records: interpreter start, the
   subcommand's imports, the work), the rest of the wall time (Snakemake's start, Snakefile parse and plan, DAG,
   scheduling and output checks), interpreter start, ``import vertebrae.stages.jobs`` (what every artifact
   subcommand loads) with and without bytecode caches (``make setup`` compiles them at install: where
   PYTHONDONTWRITEBYTECODE is set none is ever written, and every job recompiled numpy/scipy/sklearn from source).
5. The no-op run of the default config (config/config.yaml, run once first): ``snakemake --cores 1`` when every
   output is up to date, the Snakefile parse + plan + DAG a user pays before any job.
3. ``--schedulers``: the same local run under ``--scheduler greedy`` and ``--scheduler ilp``.
4. ``--candidates N`` (alone): dry run of one benchmark of N precomputed candidates (a 60-row dataset, one .npy
   file per candidate), whose report spec (~750 KB at 1,000) once broke the plan job as a shell argument (issue 18);
   the last line reads ``candidates=N dryrun_seconds=X.X jobs=J spec_files=F``.

Usage: ``python bench/workflow.py [--shards 400] [--schedulers] [--no-default]``. The last line reads
``dryrun_seconds=X.X jobs=N per_job_overhead_s=Y.YY noop_seconds=Z.Z`` (``noop_seconds=skipped`` with
``--no-default``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from workflow_support import job_counts  # noqa: E402


def _digits(extractors: dict, shards: int) -> dict:
    return {
        "seed": 0,
        "embedding": {"shards": shards, "batch_size": 256},
        "benchmarks": {"digits": {
            "dataset": {"source": {"type": "sklearn", "name": "digits"},
                        "identity": {"kind": "declared", "name": "sklearn-digits", "revision": "1"}},
            "extractors": extractors,
            "scoring": {"k": "auto"},
        }},
    }


def _large(root: Path, shards: int, benchmarks: int = 3, rows: int = 2000) -> dict:
    """``benchmarks`` precomputed-embedding datasets (npz, ``rows`` x 8), each in ``shards`` shards."""
    import numpy as np

    # shards are capped at ceil(rows / batch_size): a batch of rows // shards keeps all of them
    config = {"seed": 0, "embedding": {"shards": shards, "batch_size": max(1, rows // shards)}, "benchmarks": {}}
    for b in range(benchmarks):
        path = root / "large" / "data" / f"embeddings-{b}.npz"
        path.parent.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(b)
        np.savez(path, embeddings=rng.normal(size=(rows, 8)).astype(np.float32), labels=np.arange(rows) % 10)
        config["benchmarks"][f"b{b}"] = {
            "dataset": {"source": {"type": "npz", "path": f"data/{path.name}", "features_key": "embeddings",
                                   "labels_key": "labels"},
                        "identity": {"kind": "declared", "name": f"bench-{b}", "revision": "1"}},
            "extractors": {"precomputed": {"type": "precomputed"}},
            "scoring": {"k": "auto"},
        }
    return config


def _candidates(root: Path, n: int, rows: int = 60) -> dict:
    """One labelled benchmark of a ``rows``-row dataset (npz) and ``n`` precomputed candidates, a .npy file each."""
    import numpy as np

    data = root / "candidates" / "data"
    data.mkdir(parents=True, exist_ok=True)
    labels, rng = np.arange(rows) % 3, np.random.default_rng(0)
    np.savez(data / "dataset.npz", embeddings=np.zeros((rows, 1), np.float32), labels=labels)
    for i in range(n):
        np.save(data / f"c{i:04d}.npy", (labels[:, None] + rng.normal(size=(rows, 2))).astype(np.float32))
    return {"seed": 0, "embedding": {"shards": 1}, "benchmarks": {"many": {
        "dataset": {"source": {"type": "npz", "path": "data/dataset.npz", "features_key": "embeddings",
                               "labels_key": "labels"},
                    "identity": {"kind": "declared", "name": "tiny", "revision": "1"}},
        "extractors": {f"c{i:04d}": {"type": "precomputed", "path": f"data/c{i:04d}.npy"} for i in range(n)},
        "scoring": {"k": 4},
    }}}


def candidates_case(n: int) -> None:
    """Case 4: the dry run of ``n`` candidates, then its line."""
    with tempfile.TemporaryDirectory(prefix="vertebrae-bench-") as tmp:
        workdir = _workdir(Path(tmp), "candidates", _candidates(Path(tmp), n))
        seconds, proc = _snakemake(workdir, "-n", "--quiet", "rules", "--cores", "1")
        jobs = sum(job_counts(proc.stdout).values())
        spec_files = len(list((workdir / ".vertebrae" / "specs").glob("*.json")))
    print(f"| dry run, {n} precomputed candidates, {jobs} jobs | {seconds:.1f} s |")
    print(f"candidates={n} dryrun_seconds={seconds:.1f} jobs={jobs} spec_files={spec_files}")


def _snakemake(workdir: Path, *args: str) -> tuple[float, subprocess.CompletedProcess]:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
               OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir), *args]
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"snakemake {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return seconds, proc


def _workdir(root: Path, name: str, config: dict) -> Path:
    workdir = root / name
    (workdir / "config").mkdir(parents=True)
    (workdir / "config" / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return workdir


def _timed(code: str, **env: str) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, env=dict(os.environ, OMP_NUM_THREADS="1", **env))
    return time.perf_counter() - started


def _job_seconds(workdir: Path) -> list[float]:
    """Each job's wall time from its ``benchmark:`` record (its shell line: process start, imports, work)."""
    seconds = []
    for path in (workdir / "benchmarks").rglob("*.tsv"):
        header, row = path.read_text(encoding="utf-8").splitlines()[:2]
        seconds.append(float(dict(zip(header.split("\t"), row.split("\t")))["s"]))
    return seconds


def _noop_default(root: Path) -> tuple[float, float, int]:
    """The default config run once, then again with nothing to do: (first run s, no-op s, jobs of the first)."""
    import shutil

    workdir = root / "default"
    (workdir / "config").mkdir(parents=True)
    shutil.copy(REPO / "config" / "config.yaml", workdir / "config" / "config.yaml")
    shutil.copytree(REPO / "config" / "data", workdir / "config" / "data")
    jobs = sum(job_counts(_snakemake(workdir, "-n", "--quiet", "rules", "--cores", "1")[1].stdout).values())
    first, _ = _snakemake(workdir, "--cores", "2")
    noop, proc = _snakemake(workdir, "--cores", "1")
    if "Nothing to be done" not in proc.stdout + proc.stderr:
        raise SystemExit(f"the second run of the default config was not a no-op:\n{proc.stderr[-3000:]}")
    return first, noop, jobs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=400, help="shards per endpoint in the dry-run plan")
    parser.add_argument("--schedulers", action="store_true", help="also compare greedy and ILP scheduling")
    parser.add_argument("--no-default", action="store_true", help="skip the default config's run and no-op run")
    parser.add_argument("--candidates", type=int, metavar="N",
                        help="only the dry run of one benchmark of N precomputed candidates (e.g. 1000)")
    args = parser.parse_args()
    if args.candidates is not None:
        candidates_case(args.candidates)
        return
    with tempfile.TemporaryDirectory(prefix="vertebrae-bench-") as tmp:
        root = Path(tmp)
        large = _workdir(root, "large", _large(root, args.shards))
        dry_seconds, proc = _snakemake(large, "-n", "--quiet", "rules", "--cores", "1")
        counts = job_counts(proc.stdout)
        shard_jobs = counts.get("embed_shard", 0)
        total_jobs = sum(counts.values())

        runs = {}
        for scheduler in (["greedy", "ilp"] if args.schedulers else ["greedy"]):
            small = _workdir(root, f"small-{scheduler}", _digits({"pixels": {"type": "precomputed"}}, 16))
            jobs = sum(job_counts(_snakemake(small, "-n", "--quiet", "rules", "--cores", "1")[1].stdout).values())
            seconds, _ = _snakemake(small, "--cores", "1", "--scheduler", scheduler)
            runs[scheduler] = (seconds, jobs, _job_seconds(small))
        parse_seconds, _ = _snakemake(small, "-n", "--cores", "1")  # nothing to do: parse + DAG only

        interpreter = _timed("pass")
        jobs_import = _timed("import vertebrae.stages.jobs")
        cli_import = _timed("import vertebrae.cli")
        pycache = root / "pycache"  # an empty bytecode cache, never written: every module compiled from source
        jobs_import_cold = _timed("import vertebrae.stages.jobs", PYTHONPYCACHEPREFIX=str(pycache),
                                  PYTHONDONTWRITEBYTECODE="1")
        default = None if args.no_default else _noop_default(root)

    print("| measurement | value |")
    print("|---|---|")
    print(f"| dry run, {total_jobs} jobs ({shard_jobs} embed_shard) | {dry_seconds:.1f} s |")
    for scheduler, (seconds, jobs, job_seconds) in runs.items():
        own = sum(job_seconds)
        print(f"| local run, {jobs} jobs, --cores 1, --scheduler {scheduler} | {seconds:.1f} s ({seconds / jobs:.2f} s/job) |")
        print(f"| - of which the jobs' own processes ({len(job_seconds)} benchmark records: start, imports, work) | "
              f"{own:.1f} s ({own / max(1, len(job_seconds)):.2f} s/job, {own / seconds:.0%}) |")
        print(f"| - of which Snakemake (start, parse + plan, DAG, scheduling, output checks) | {seconds - own:.1f} s "
              f"({(seconds - own) / seconds:.0%}) |")
    print(f"| snakemake start + Snakefile parse + DAG (nothing to do) | {parse_seconds:.2f} s |")
    print(f"| python start | {interpreter:.2f} s |")
    print(f"| python start + import vertebrae.cli | {cli_import:.2f} s |")
    print(f"| python start + import vertebrae.stages.jobs (every artifact subcommand) | {jobs_import:.2f} s |")
    print(f"| the same, no bytecode cache (PYTHONDONTWRITEBYTECODE without make setup's .pyc) | {jobs_import_cold:.2f} s |")
    if default is not None:
        print(f"| default config, first run, {default[2]} jobs, --cores 2 | {default[0]:.1f} s |")
        print(f"| default config, no-op run (nothing to do), --cores 1 | {default[1]:.2f} s |")
    seconds, jobs, _ = runs["greedy"]
    noop = "skipped" if default is None else f"{default[1]:.1f}"
    print(f"dryrun_seconds={dry_seconds:.1f} jobs={shard_jobs} per_job_overhead_s={seconds / jobs:.2f} noop_seconds={noop}")


if __name__ == "__main__":
    main()
