"""Exact retrieval at cluster scale: planning a fanned-out benchmark, and a fan-out run against one job (a harness).

1. Plan: a Snakemake dry run of a 1,000,000-query x 10,000,000-item benchmark (one HDF5 source of 11,000,000 x 768
   float32 rows, every 11th row a query; the HDF5 datasets are declared at full size and never written, so they
   cost no disk) split ``--split`` x ``--split`` (default 100 x 100 = 10,000 partial-score jobs), divided by the dry
   run of a trivial Snakefile with the same number of jobs, timed in the same run: ``plan_ratio``, in CPU time
   (user + system of the Snakemake process; ``--repeats`` interleaved runs of each, the fastest kept; the wall
   time ratio is printed beside it).
2. Run: 20,000 queries x 1,000,000 gallery items x 64 dims (one HDF5 source of 1,020,000 rows, every 51st a query,
   50 relevant items each), through Snakemake ``--cores 2``: the score stage split 2 x 4 against one job, after the
   embeddings exist (each timing forces the score stage's rules to run, and what follows: compare, report, figures),
   the one score job on ``--threads`` threads (config ``threads.scoring``, default 2: the whole machine), the
   partial jobs on ``--partial-threads`` each (default 1: Snakemake runs two at a time, as a cluster runs partial
   jobs sized to their cores, so that a job's serial phases, start and reads, overlap another's scan), wall time
   of ``--run-repeats`` interleaved runs of each kind, the fastest of each kept: ``fanout_ratio``; the reports'
   metrics must be equal. The CPU-time ratio (user + system of all jobs) is printed beside it.
3. ``peak_job_mib``: the largest partial job's peak RSS (Snakemake's benchmark file), checked against its declared
   mem_mb.
4. The breakdown of the fastest runs, from each job's Snakemake benchmark record (wall ``s``) and the ``phases:``
   line of its log (``vertebrae.core.phases``): per job kind, its wall time as Snakemake saw it and, inside it, the
   process start (interpreter, imports; record minus the job's own clock), reading, the kernel, writing and the
   rest, summed over the kind's jobs; for the partials also their kernel time against the one job's (the share
   of the work the split adds or removes).

Usage: ``python bench/retrieval_scale.py [--split 100] [--repeats 5] [--threads 2] [--partial-threads 1]
[--run-repeats 2] [--skip-run]``.
The last line reads ``plan_ratio=P jobs=N fanout_ratio=R peak_job_mib=M``.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from workflow_support import comparable, job_counts  # noqa: E402

sys.path.insert(0, str(REPO))
from vertebrae.core.phases import parse_phases  # noqa: E402
from vertebrae.planning import plan as plan_config  # noqa: E402

SCORE_RULES = ("score_retrieval", "stage_retrieval_fanout", "score_retrieval_partial", "merge_retrieval_partials")


def _env() -> dict[str, str]:
    """The venv's tools first; bytecode caching on (as `make` runs things: a shell that sets
    PYTHONDONTWRITEBYTECODE recompiles every imported module on every start, for Snakemake and us alike)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return dict(env, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")


def _snakemake(workdir: Path, *args: str, snakefile: Path = REPO / "Snakefile") -> tuple[float, str]:
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(snakefile), "--directory", str(workdir), *args]
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=workdir, env=_env(), capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"snakemake {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return seconds, proc.stdout + proc.stderr


def _hdf5_source(path: Path, rows: int, dim: int, *, every: int, write: bool) -> None:
    """Features (rows x dim float32) and labels (row // every: one query and every - 1 gallery items per label);
    unwritten when ``write`` is False (HDF5 allocates chunks on first write)."""
    import h5py
    import numpy as np

    path.parent.mkdir(parents=True, exist_ok=True)
    with h5py.File(path, "w") as f:
        features = f.create_dataset("embeddings", shape=(rows, dim), dtype="float32", chunks=(min(rows, 4096), dim))
        labels = f.create_dataset("labels", shape=(rows,), dtype="int64", chunks=(min(rows, 65536),))
        if write:
            rng = np.random.default_rng(0)
            for start in range(0, rows, 65536):
                stop = min(rows, start + 65536)
                features[start:stop] = rng.normal(size=(stop - start, dim)).astype(np.float32)
                labels[start:stop] = np.arange(start, stop) // every


def _config(path: str, *, every: int, split: tuple[int, int], threads: int = 1) -> dict:
    return {"seed": 0, "embedding": {"shards": 1, "batch_size": 65536}, "threads": {"embedding": 1, "scoring": threads},
            "retrieval": {"scale": {
        "dataset": {"source": {"type": "label_split", "query_every": every,
                               "source": {"type": "hdf5", "path": path, "features_dataset": "embeddings",
                                          "labels_dataset": "labels"}},
                    "identity": {"kind": "declared", "name": "bench-scale", "revision": "1"}},
        "extractors": {"precomputed": {"type": "precomputed"}},
        "scoring": {"query_shards": split[0], "gallery_shards": split[1]},
        "retrieval": {"similarity": "cosine", "ks": [10], "primary_metric": "ndcg@10"},
    }}}


def _workdir(root: Path, name: str, config: dict) -> Path:
    workdir = root / name
    (workdir / "config").mkdir(parents=True, exist_ok=True)
    (workdir / "config" / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return workdir


def _trivial(root: Path, jobs: int) -> Path:
    workdir = root / "trivial"
    workdir.mkdir()
    (workdir / "Snakefile").write_text(
        f"rule all:\n    input: expand('out/{{i}}.txt', i=range({jobs - 1}))\n\n"
        "rule one:\n    output: 'out/{i}.txt'\n    shell: 'touch {output}'\n", encoding="utf-8")
    return workdir


def _dry_run_cpu(workdir: Path, snakefile: Path) -> tuple[float, float, str]:
    """(CPU seconds, wall seconds, output) of a dry run: user + system time of the Snakemake process, which other
    load on the machine barely changes (wall time swings by seconds here)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall, out = _snakemake(workdir, "-n", "--quiet", "rules", "--cores", "1", snakefile=snakefile)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall, out


def plan_ratio(root: Path, split: int, repeats: int) -> tuple[float, int, float, float]:
    data = root / "plan" / "data" / "scale.h5"
    _hdf5_source(data, 11_000_000, 768, every=11, write=False)
    workdir = _workdir(root, "plan", _config("data/scale.h5", every=11, split=(split, split)))
    ours, ours_wall, out = _dry_run_cpu(workdir, REPO / "Snakefile")
    counts = job_counts(out)
    jobs = sum(counts.values())
    trivial = _trivial(root, jobs)
    floor, floor_wall, out = _dry_run_cpu(trivial, trivial / "Snakefile")
    assert sum(job_counts(out).values()) == jobs, "the trivial DAG must have as many jobs"
    for _ in range(repeats - 1):  # interleaved repeats, the fastest of each kept
        cpu, wall, _ = _dry_run_cpu(workdir, REPO / "Snakefile")
        ours, ours_wall = min(ours, cpu), min(ours_wall, wall)
        cpu, wall, _ = _dry_run_cpu(trivial, trivial / "Snakefile")
        floor, floor_wall = min(floor, cpu), min(floor_wall, wall)
    print(f"| dry run, {jobs:,} jobs ({counts.get('score_retrieval_partial', 0):,} partial scores): CPU, wall "
          f"| {ours:.1f} s, {ours_wall:.1f} s |")
    print(f"| dry run, trivial Snakefile, {jobs:,} jobs: CPU, wall | {floor:.1f} s, {floor_wall:.1f} s |")
    print(f"| ratio: CPU, wall | {ours / floor:.2f}, {ours_wall / floor_wall:.2f} |")
    return ours / floor, jobs, ours, floor


def _score_stage(workdir: Path, rules: tuple[str, ...]) -> tuple[float, float]:
    """(wall, CPU seconds) of a run that redoes the score stage (``--forcerun`` its ``rules``) and what follows
    it; the score rules must have run (a run that finds the score up to date times nothing)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    seconds, out = _snakemake(workdir, "--cores", "2", "--forcerun", *rules)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    counts = job_counts(out)
    assert all(counts.get(rule) for rule in rules), f"the score stage did not run: {counts}"
    return seconds, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _record_s(path: Path) -> tuple[float, float]:
    """(wall s, max_rss MiB) of a Snakemake benchmark record."""
    with open(path, encoding="utf-8") as handle:
        row = next(csv.DictReader(handle, delimiter="\t"))
    return float(row["s"]), float(row["max_rss"])


def breakdown(workdir: Path) -> dict[str, dict[str, float]]:
    """Per score rule that ran last in ``workdir``: ``jobs``, ``wall`` (the records' s, summed) and the phases of
    the jobs' logs summed (``start``: record wall minus the job's own clock; ``rest``: the job's clock minus its
    named phases)."""
    wp = plan_config(yaml.safe_load((workdir / "config" / "config.yaml").read_text(encoding="utf-8")), base_dir=workdir)
    jobs = {"score_retrieval": [f"score_retrieval/{fp}" for fp in wp.fingerprints("score-retrieval")],
            "stage_retrieval_fanout": [f"stage_retrieval_fanout/{fp}" for fp in set(wp.fanouts.values())],
            "score_retrieval_partial": [f"score_retrieval_partial/{wp.fanouts[fp]}/{fp}"
                                        for fp in wp.fingerprints("score-retrieval-partial")],
            "merge_retrieval_partials": [f"merge_retrieval_partials/{fp}" for fp in set(wp.fanouts.values())]}
    found: dict[str, dict[str, float]] = {}
    for rule, names in jobs.items():
        total: dict[str, float] = {}
        for name in names:
            record, log = workdir / wp.record(name), workdir / wp.log(name)
            phases = parse_phases(log.read_text(encoding="utf-8")) if log.exists() else None
            if not record.exists() or phases is None:
                break
            wall = _record_s(record)[0]
            named = {key: value for key, value in phases.items() if key not in ("start", "job")}
            parts = {"jobs": 1, "wall": wall, "start": wall - phases["job"], **named,
                     "rest": phases["job"] - sum(named.values())}
            for key, value in parts.items():
                total[key] = total.get(key, 0.0) + value
        else:
            if names:
                found[rule] = total
    return found


def print_breakdown(single: dict[str, dict[str, float]], fanned: dict[str, dict[str, float]]) -> None:
    """The breakdown table (seconds summed over each rule's jobs; wall of a job as Snakemake timed it)."""
    print("| job kind (fastest runs) | jobs | wall (sum) | start | read | kernel | summary | write | rest |")
    print("|---|---|---|---|---|---|---|---|---|")
    for rule, row in [*single.items(), *fanned.items()]:
        cells = " | ".join(f"{row[key]:.2f}" if key in row else "-"
                           for key in ("wall", "start", "read", "kernel", "summary", "write", "rest"))
        print(f"| {rule} | {int(row['jobs'])} | {cells} |")
    one, parts = single.get("score_retrieval"), fanned.get("score_retrieval_partial")
    if one and parts and one.get("kernel"):
        print(f"| partials' kernel (sum) / the one job's kernel | {parts['kernel'] / one['kernel']:.2f} |")


def fanout_ratio(root: Path, threads: int, partial_threads: int, repeats: int) -> tuple[float, float, float, int]:
    data = root / "run" / "data" / "scale.h5"
    _hdf5_source(data, 1_020_000, 64, every=51, write=True)
    one = _config("data/scale.h5", every=51, split=(1, 1), threads=threads)
    workdir = _workdir(root, "run", one)
    _snakemake(workdir, "--cores", "2", "--until", "merge_retrieval_embeddings", "write_retrieval_relevance")
    report_path = workdir / "results/reports/scale/report.json"
    single = fanned = single_cpu = fanned_cpu = float("inf")
    for _ in range(repeats):  # interleaved, the fastest of each kept: this machine's speed drifts over minutes
        _workdir(root, "run", one)
        wall, cpu = _score_stage(workdir, ("score_retrieval",))
        if wall < single:
            single_parts = breakdown(workdir)
        single, single_cpu = min(single, wall), min(single_cpu, cpu)
        single_report = json.loads(report_path.read_text(encoding="utf-8"))
        _workdir(root, "run", _config("data/scale.h5", every=51, split=(2, 4), threads=partial_threads))
        wall, cpu = _score_stage(workdir, ("stage_retrieval_fanout", "score_retrieval_partial",
                                           "merge_retrieval_partials"))
        if wall < fanned:
            fanned_parts = breakdown(workdir)
        fanned, fanned_cpu = min(fanned, wall), min(fanned_cpu, cpu)
        report = json.loads(report_path.read_text(encoding="utf-8"))
        assert comparable(report["candidate_results"]) == comparable(single_report["candidate_results"]), \
            "the fanned-out score differs from the one-job score"
    wp = plan_config(yaml.safe_load((workdir / "config" / "config.yaml").read_text(encoding="utf-8")), base_dir=workdir)
    peak, declared = 0.0, 0
    for fp in wp.fingerprints("score-retrieval-partial"):
        rss = _record_s(workdir / wp.record(f"score_retrieval_partial/{wp.fanouts[fp]}/{fp}"))[1]  # under its merge
        if rss > peak:
            peak, declared = rss, wp.partial_mem_mb(fp)
    print(f"| one score job on {threads} thread(s), 20,000 x 1,000,000 x 64 (+ compare, report, figures), fastest "
          f"of {repeats}: wall, CPU | {single:.1f} s, {single_cpu:.1f} s |")
    print(f"| staging + 2 x 4 partial jobs of {partial_threads} thread(s) + merge, --cores 2 (+ compare, report, "
          f"figures), fastest of {repeats}: wall, CPU | {fanned:.1f} s, {fanned_cpu:.1f} s |")
    print(f"| ratio: wall, CPU | {fanned / single:.2f}, {fanned_cpu / single_cpu:.2f} |")
    print(f"| largest partial job: peak RSS / declared mem_mb | {peak:.0f} / {declared} MiB |")
    assert peak <= declared, f"a partial job used {peak:.0f} MiB, more than its declared {declared} mem_mb"
    print_breakdown(single_parts, fanned_parts)
    return fanned / single, single, fanned, int(round(peak))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", type=int, default=100, help="query and gallery shards of the planned benchmark")
    parser.add_argument("--repeats", type=int, default=5, help="dry runs of each kind (the fastest counts)")
    parser.add_argument("--partial-threads", type=int, default=1,
                        help="scoring threads of each partial job (1: two partial jobs at a time on --cores 2)")
    parser.add_argument("--threads", type=int, default=2,
                        help="scoring threads of the one job (2: it keeps the machine's two cores busy)")
    parser.add_argument("--run-repeats", type=int, default=2,
                        help="interleaved one-job and fan-out runs of each kind (the fastest counts; ~11 min each)")
    parser.add_argument("--skip-run", action="store_true", help="plan only (no 20k x 1M run)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="vertebrae-scale-") as tmp:
        root = Path(tmp)
        print("| measurement | value |")
        print("|---|---|")
        p, jobs, _, _ = plan_ratio(root, args.split, args.repeats)
        r, m = float("nan"), 0
        if not args.skip_run:
            r, _, _, m = fanout_ratio(root, args.threads, args.partial_threads, args.run_repeats)
    print(f"plan_ratio={p:.2f} jobs={jobs} fanout_ratio={r:.2f} peak_job_mib={m}")


if __name__ == "__main__":
    main()
