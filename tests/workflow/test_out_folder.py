"""One working folder (issue 45, part 4): a run writes everything under its out folder (``--out DIR``; the config key
``out``), only Snakemake's ``.snakemake/`` beside it, with the same fingerprints; a results folder of the old layout
(logs/, benchmarks/, .vertebrae/ beside results/) is still read by ``vertebrae verify`` and ``vertebrae leaderboard``."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import yaml

from workflow_support import BIN, USER_CONFIG

from vertebrae.planning import plan


def vertebrae(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(BIN / "vertebrae"), *args], cwd=cwd, capture_output=True, text=True, timeout=600)
    assert not check or proc.returncode == 0, f"vertebrae {' '.join(args)}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def test_a_run_with_out_writes_nothing_else_in_the_working_folder(tmp_path):
    (tmp_path / "my.yaml").write_text(yaml.safe_dump(USER_CONFIG, sort_keys=False), encoding="utf-8")
    before = {p.name for p in tmp_path.iterdir()}
    vertebrae(tmp_path, "run", "my.yaml", "--out", "runs/a", "--cores", "2")
    assert {p.name for p in tmp_path.iterdir()} - before == {".snakemake", "runs"}
    out = tmp_path / "runs" / "a"
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["a"]
    assert {"logs", "benchmarks", ".vertebrae", "plans", "reports", "index.html"} <= {p.name for p in out.iterdir()}
    assert list((out / "logs" / "snakemake").glob("*.log")) and list((out / "benchmarks" / "score").glob("*.tsv"))
    assert {p.name for p in (out / ".vertebrae").iterdir()} >= {"specs", "plans", "out.json"}
    # the out folder is in no fingerprint: the same config planned into results/ names the same artifacts
    moved, default = plan({**USER_CONFIG, "out": "runs/a"}, base_dir=tmp_path), plan(USER_CONFIG, base_dir=tmp_path)
    assert sorted(moved.specs) == sorted(default.specs)
    scores = sorted(p.name for p in (out / "scores").iterdir())
    assert scores == sorted(f"{fp}.json" for fp in default.fingerprints("score"))
    assert "every artifact verifies" in vertebrae(tmp_path, "verify", "runs/a").stdout
    rows = json.loads(vertebrae(tmp_path, "leaderboard", "runs/a", "--format", "json").stdout)["rows"]
    assert rows and all(row["score_seconds"] is not None for row in rows)
    # a rerun into the same folder has nothing to do; a file named as the out folder is refused at once, naming it
    assert vertebrae(tmp_path, "run", "--out", "runs/a", "my.yaml", "-n").returncode == 0
    (tmp_path / "taken").write_text("")
    refused = vertebrae(tmp_path, "run", "my.yaml", "--out", "taken", check=False)
    assert refused.returncode == 2 and "--out: taken is not a folder" in refused.stderr
    assert not (tmp_path / "taken.snakemake").exists() and (tmp_path / "taken").read_text() == ""


def test_an_old_layout_results_folder_is_still_read(workdir_copy):
    """The default run moved to the old layout: its logs, records and state beside results/ in the working folder."""
    for name in ("logs", "benchmarks", ".vertebrae"):
        shutil.move(str(workdir_copy / "results" / name), str(workdir_copy / name))
    assert "every artifact verifies" in vertebrae(workdir_copy, "verify").stdout
    report = next((workdir_copy / "results" / "reports").glob("*/report.json"))
    document = json.loads(report.read_text(encoding="utf-8"))
    for candidate in document.get("extractor_results") or document["candidate_results"]:
        candidate["metadata"].pop("cost", None)  # an older report.json: its costs come from the records
    from vertebrae.results.base import with_content_hash

    document.pop("content_hash")
    report.write_text(json.dumps(with_content_hash(document)), encoding="utf-8")
    rows = json.loads(vertebrae(workdir_copy, "leaderboard", "--format", "json").stdout)["rows"]
    mine = [row for row in rows if row["report"] == str(report.relative_to(workdir_copy))]
    assert mine and all(row["score_seconds"] is not None for row in mine)  # found in benchmarks/ beside results/
