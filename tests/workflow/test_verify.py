"""Corruption through the real workflow: a job that refuses a corrupt input moves it (and what was built from it)
aside so that a plain rerun rebuilds it; ``vertebrae verify`` finds corrupt artifacts and ``--repair`` lets the
next run rebuild exactly those, to the same reports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vertebrae.core.artifacts import read_embeddings
from vertebrae.planning import plan

from workflow_support import comparable, snakemake, write_config

CONFIG = {
    "seed": 0,
    "embedding": {"shards": 2, "batch_size": 512},
    "benchmarks": {
        "digits": {
            "dataset": {"source": {"type": "sklearn", "name": "digits"},
                        "identity": {"kind": "declared", "name": "sklearn-digits", "revision": "1"}},
            "extractors": {
                "pixels": {"type": "precomputed"},
                "pca16": {"type": "sklearn", "steps": [{"estimator": "sklearn.decomposition.PCA",
                                                        "params": {"n_components": 16}}]},
            },
            "scoring": {"k": "auto"},
        },
    },
}
REPORT = Path("results/reports/digits/report.json")


def _vertebrae(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vertebrae", *args], cwd=workdir, capture_output=True, text=True)


def _report(workdir: Path) -> dict:
    return comparable(json.loads((workdir / REPORT).read_text(encoding="utf-8")))


def _moved(workdir: Path) -> list[str]:
    return sorted(str(p.relative_to(workdir)) for p in (workdir / "results").rglob("*.corrupt-*"))


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    workdir = tmp_path_factory.mktemp("verify-run")
    write_config(workdir, CONFIG)
    snakemake(workdir)
    return workdir


def test_corrupt_input_is_moved_aside_and_a_plain_rerun_rebuilds_it(run):
    before = _report(run)
    workflow_plan = plan(CONFIG, base_dir=run)
    spec = workflow_plan.spec(workflow_plan.fingerprints("score")[0])
    embedding = spec["embedding"]["path"]
    size = (run / embedding).stat().st_size
    with open(run / embedding, "r+b") as handle:
        handle.truncate(size // 2)

    failed = snakemake(run, check=False)
    assert failed.returncode != 0
    log = (run / "results" / "logs" / "score" / f"{spec['fingerprint']}.log").read_text(encoding="utf-8")
    assert embedding in log and "moved it aside to" in log and "run the workflow again" in log
    assert not (run / embedding).exists() and not (run / REPORT).exists()
    assert any(m.startswith(embedding + ".corrupt-") for m in _moved(run)), _moved(run)

    snakemake(run)  # the plain rerun: rebuilds the embedding, its score and the report
    read_embeddings(run / embedding, fingerprint=spec["embedding"]["fingerprint"])
    assert _report(run) == before
    assert "Nothing to be done" in (lambda p: p.stdout + p.stderr)(snakemake(run, "-n"))


def test_verify_lists_corrupt_artifacts_and_repair_rebuilds_exactly_them(run):
    before = _report(run)
    assert _vertebrae(run, "verify").returncode == 0
    workflow_plan = plan(CONFIG, base_dir=run)
    score_spec = workflow_plan.spec(workflow_plan.fingerprints("score")[1])
    score = run / score_spec["score"]["path"] if "score" in score_spec else run / f"results/scores/{score_spec['fingerprint']}.json"
    document = json.loads(score.read_text(encoding="utf-8"))
    document["payload"]["overlap"]["score"] = 1.0  # a silent edit: only the content hash can tell
    score.write_text(json.dumps(document), encoding="utf-8")
    shard = sorted((run / "results" / "embeddings").glob("*/shard-1-of-2.h5"))[0]
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))

    found = _vertebrae(run, "verify")
    assert found.returncode == 2, found.stdout + found.stderr
    bad = {line.split(": ")[1] for line in found.stdout.splitlines() if line.startswith("bad: ")}
    assert str(score.relative_to(run)) in bad and str(shard.relative_to(run)) in bad
    assert "corrupt or stale" in found.stderr

    repaired = _vertebrae(run, "verify", "--repair")
    assert repaired.returncode == 0, repaired.stderr
    assert not score.exists() and not shard.exists() and not (run / REPORT).exists()
    dry = snakemake(run, "-n")
    assert "embed_shard" in dry.stdout and "score" in dry.stdout and "fit_extractor" not in dry.stdout
    snakemake(run)
    assert _vertebrae(run, "verify").returncode == 0
    assert _report(run) == before


def test_figures_refuse_a_hand_edited_report(run, tmp_path):
    report = json.loads((run / REPORT).read_text(encoding="utf-8"))
    report["ranking"] = list(reversed(report["ranking"]))  # the drawing would contradict the scores
    edited = tmp_path / "report.json"
    edited.write_text(json.dumps(report), encoding="utf-8")
    proc = _vertebrae(run, "figures", "--report", str(edited), "--ranking-output", str(tmp_path / "r.png"),
                      "--detail-output", str(tmp_path / "d.png"))
    assert proc.returncode == 2 and str(edited) in proc.stderr and "edited" in proc.stderr
    assert not (tmp_path / "r.png").exists()


def test_a_hand_edited_report_md_never_reaches_the_pages_and_a_plain_rerun_restores_it(run):
    """Issue 48: report.md edited after a run is newer than the pages, so a rerun renders them again; the page jobs
    check report.md against its report.json first, refuse the edit and move it aside with the pages built from it;
    the next plain run writes them all again from report.json."""
    markdown = run / REPORT.with_name("report.md")
    original = markdown.read_text(encoding="utf-8")
    first = json.loads((run / REPORT).read_text(encoding="utf-8"))["ranking"][0]
    assert f"| 1 | {first} |" in original
    markdown.write_text(original.replace(f"| 1 | {first} |", "| 1 | FAKE-LEADER |"), encoding="utf-8")

    failed = snakemake(run, check=False)
    assert failed.returncode != 0
    pages = [run / REPORT.with_name(name) for name in ("report.html", "ranking.html")]
    assert not any(page.exists() and "FAKE-LEADER" in page.read_text(encoding="utf-8") for page in pages)
    assert not markdown.exists() and any(m.startswith(str(REPORT.with_name("report.md.corrupt-"))) for m in _moved(run))

    snakemake(run)
    assert markdown.read_text(encoding="utf-8") == original
    assert all("FAKE-LEADER" not in page.read_text(encoding="utf-8") for page in pages)
    assert _vertebrae(run, "verify").returncode == 0


def test_a_symlinked_score_is_repaired_by_its_target_and_the_next_run_rebuilds_it(run, tmp_path):
    """Issue 48: a score artifact that is a link to an edited file outside results/ is checked by its target; repair
    sets the target's bytes aside as ``<score>.corrupt-*`` (a plain file), removes the link, leaves the target as it
    was, and moves what was built from the score; the next run writes the score as a plain file, and verify is
    clean."""
    before = _report(run)
    workflow_plan = plan(CONFIG, base_dir=run)
    score = run / "results" / "scores" / f"{workflow_plan.fingerprints('score')[0]}.json"
    document = json.loads(score.read_text(encoding="utf-8"))
    document["payload"]["overlap"]["score"] = 1.0  # a silent edit: only the content hash can tell
    target = tmp_path / "shared-cache" / "score.json"
    target.parent.mkdir()
    target.write_text(json.dumps(document), encoding="utf-8")
    score.unlink()
    score.symlink_to(target)

    found = _vertebrae(run, "verify")
    assert found.returncode == 2 and f"bad: {score.relative_to(run)}" in found.stdout, found.stdout
    assert _vertebrae(run, "verify", "--repair").returncode == 0
    assert not os.path.lexists(score) and target.read_text(encoding="utf-8") == json.dumps(document)
    aside = [run / m for m in _moved(run) if m.startswith(str(score.relative_to(run)) + ".corrupt-")]
    assert aside and not aside[-1].is_symlink() and aside[-1].read_text(encoding="utf-8") == json.dumps(document)
    assert not (run / REPORT).exists()

    snakemake(run)
    assert score.is_file() and not score.is_symlink()
    assert _vertebrae(run, "verify").returncode == 0
    assert _report(run) == before
