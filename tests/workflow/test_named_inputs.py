"""The files a source names (issue 47, part 1): an embedding shard job opens exactly the images or tar files its
rule declares (``vertebrae.planning.job_files``), no other of the source's; the plan job of its spec and the protocol
job open nothing undeclared either. Each job runs as the workflow runs it, ``vertebrae SUBCOMMAND`` in a process of
its own, watched by the file-access audit's hook (file_audit/sitecustomize.py), on a plan made here: no Snakemake
run (each job costs a process start, under a second)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from small_workflow import audit_env
from vertebrae.core.artifacts import write_json_artifact

TESTS = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    """12 tiny images as an image manifest and as 3 WebDataset tars of 4 rows, each a zero-shot benchmark of 3
    sample shards, planned in ``root`` (the working folder)."""
    from image_sources import image_sources, zero_shot_bench
    from vertebrae.planning import plan

    root = tmp_path_factory.mktemp("named-inputs")
    sources = image_sources(root)
    config = {"embedding": {"shards": 3, "batch_size": 2},
              "zero_shot": {name: zero_shot_bench(sources[name]) for name in ("man", "wds")}}
    cwd = os.getcwd()
    os.chdir(root)
    try:
        return root, plan(config, base_dir=".")
    finally:
        os.chdir(cwd)


def _opened(log: Path, root: Path) -> set[str]:
    """The files under ``root``'s data/ the audited processes opened or listed, relative to ``root``."""
    found = set()
    for record in log.glob("*.jsonl"):
        for line in record.read_text(encoding="utf-8").splitlines():
            path = json.loads(line).get("path")
            if path and Path(path).is_relative_to(root / "data"):
                found.add(Path(path).relative_to(root).as_posix())
    return found


def _audited(root: Path, log: Path, *args: str) -> set[str]:
    """Run ``vertebrae ARGS`` in ``root`` as a job runs, its file accesses logged; what it opened under data/."""
    env = dict(os.environ, **audit_env(log))
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], str(TESTS)])  # the callable extractor's module
    proc = subprocess.run([str(Path(sys.executable).parent / "vertebrae"), *args], cwd=root, env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return _opened(log, root)


def _declared(root: Path, of) -> set[str]:
    cwd = os.getcwd()
    os.chdir(root)
    try:
        return set(of().get("data") or ())
    finally:
        os.chdir(cwd)


@pytest.mark.parametrize("benchmark", ["man", "wds"])
def test_the_plan_and_protocol_jobs_open_only_what_they_declare(planned, benchmark, tmp_path):
    """The plan job of a sample embedding spec (it counts the manifest's rows, checks every tar) and the protocol job
    (it hashes every image or tar for the dataset's identity) open exactly their declared data files."""
    from vertebrae.planning.spec_files import write_spec_files

    root, plan = planned
    (embed,) = [fp for fp, spec in plan.specs.items() if spec["stage"] == "zero-shot-embed"
                and spec["side"] == "samples" and spec["where"].startswith(f"zero_shot.{benchmark}.")]
    (spec_file,) = write_spec_files({embed: plan.specs[embed]}, tmp_path).values()
    opened = _audited(root, tmp_path / "plan-audit", "plan", "--spec-file", str(tmp_path / spec_file), "--output",
                      str(tmp_path / "plan.json"))
    assert opened == _declared(root, lambda: plan.plan_inputs(embed)) == (
        {"data/images.csv"} if benchmark == "man" else {f"data/shards/train-{i:06d}.tar" for i in range(3)})
    (protocol,) = [fp for fp, spec in plan.specs.items() if spec["stage"] == "zero-shot-protocol"
                   and spec["where"].startswith(f"zero_shot.{benchmark}")]
    write_json_artifact(tmp_path / f"{protocol}.json", "plan", plan.specs[protocol], fingerprint=protocol,
                        recipe=plan.specs[protocol]["recipe"])
    opened = _audited(root, tmp_path / "protocol-audit", "write-zero-shot-protocol", "--plan-json",
                      str(tmp_path / f"{protocol}.json"), "--output", str(tmp_path / "protocol.json"))
    assert opened <= _declared(root, lambda: plan.inputs(protocol))
    assert len(_declared(root, lambda: plan.inputs(protocol))) == (13 if benchmark == "man" else 3)


@pytest.mark.parametrize("benchmark", ["man", "wds"])
def test_a_shard_job_opens_only_the_images_or_tars_it_declares(planned, benchmark, tmp_path):
    root, plan = planned
    (fp,) = [fp for fp, spec in plan.specs.items() if spec["stage"] == "zero-shot-embed"
             and spec["side"] == "samples" and spec["where"].startswith(f"zero_shot.{benchmark}.")]
    spec = plan.specs[fp]
    plan_json = tmp_path / f"{fp}.json"
    write_json_artifact(plan_json, "plan", spec, fingerprint=fp, recipe=spec["recipe"])
    env = dict(os.environ, **audit_env(tmp_path / "audit"))
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], str(TESTS)])  # the callable extractor's module
    vertebrae = Path(sys.executable).parent / "vertebrae"
    proc = subprocess.run([str(vertebrae), "embed-zero-shot-shard", "--plan-json", str(plan_json), "--side", "samples",
                           "--shard-index", "1",
                           "--output", str(tmp_path / "shard.h5")], cwd=root, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    cwd = os.getcwd()
    os.chdir(root)
    try:
        declared = set(plan.inputs(fp, shard=1)["data"])
    finally:
        os.chdir(cwd)
    opened = _opened(tmp_path / "audit", root)
    # every file it opened is declared, and what it declares is what it opens: its own 4 rows' images, or 1 tar
    assert opened == declared - {"data/images.csv"} | ({"data/images.csv"} if benchmark == "man" else set())
    assert len(declared) == (5 if benchmark == "man" else 1)
