"""Issue 18's Done-when, locally: three precomputed embedding files compared in one labelled benchmark and three
per-endpoint pairs in one retrieval benchmark (``three_files_config``: an .npz, an .h5 and an .npy + ids file, rows
in their own orders, no identity declared) run with ``vertebrae run``; editing one file in place then plans only its
candidate's embedding, merge and score jobs, and the comparison, report and summary. (On SLURM: test_slurm.py.)"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
import yaml

from vertebrae.workflow import plan
from workflow_support import BIN, job_counts, three_files_config

REPORT_SIDE = {"compare": 1, "report": 1, "figures": 1, "report_tables": 1, "report_page": 1,
               "leaderboard_page": 1, "results_index": 1, "summary": 1, "all": 1}


def vertebrae(work: Path, *args: str) -> str:
    """``vertebrae ARGS`` in ``work``, the test environment's bin folder first on PATH (an activated environment)."""
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    proc = subprocess.run([str(BIN / "vertebrae"), *args], cwd=work, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, f"vertebrae {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-4000:]}"
    return proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def done(tmp_path_factory) -> tuple[Path, dict]:
    """A directory where ``vertebrae run my.yaml --cores 2`` has run the three-files config to the end."""
    work = tmp_path_factory.mktemp("three-files")
    config = three_files_config(work)
    (work / "my.yaml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    vertebrae(work, "run", "my.yaml", "--cores", "2")
    return work, config


def report(work: Path, benchmark: str) -> dict:
    return json.loads((work / "results" / "reports" / benchmark / "report.json").read_text(encoding="utf-8"))


def test_both_reports_rank_the_three_files(done):
    work, _ = done
    labelled = report(work, "models")
    assert sorted(labelled["ranking"]) == ["a", "b", "c"] and labelled["ranking_available"], labelled["ranking"]
    assert sorted(r["name"] for r in labelled["extractor_results"]) == ["a", "b", "c"]
    assert labelled["ranking"][-1] == "c", labelled["ranking"]  # c's classes are the least separated (0.5 vs 1.5, 3)
    # qa, qb, qc: the same topics under growing noise (0.3, 0.8, 1.5)
    assert report(work, "search")["ranking"] == ["qa", "qb", "qc"]
    assert "Nothing to be done" in vertebrae(work, "run", "my.yaml", "-n")


def new_values(path: Path, member: str) -> bytes:
    """Overwrite ``member`` of the .npz at ``path`` in place with noise (same shape); returns the old bytes."""
    old = path.read_bytes()
    members = dict(np.load(path))
    members[member] = np.random.default_rng(7).normal(size=members[member].shape).astype(np.float32)
    np.savez(path, **members)
    return old


def edit_plans(work: Path, config: dict, monkeypatch, edit) -> tuple[dict[str, int], list[dict], str]:
    """The dry run's job table after ``edit()``, the embed specs the edit changed, and the dry run's output; the
    edited file's bytes are put back afterwards (so each test starts from the finished run)."""
    monkeypatch.chdir(work)  # plan() reads the extractors' files relative to the current directory, as jobs do
    before = plan(config, base_dir=work)
    path, old = edit()
    try:
        after = plan(config, base_dir=work)
        embeds = [after.spec(fp) for fp in set(after.specs) - set(before.specs) if after.spec(fp)["stage"] == "embed"]
        out = vertebrae(work, "run", "my.yaml", "-n")
    finally:
        path.write_bytes(old)
    return job_counts(out), embeds, out


def test_editing_one_labelled_file_reruns_only_its_candidate(done, monkeypatch):
    work, config = done

    def edit():
        path = work / "emb" / "a.npz"
        return path, new_values(path, "embeddings")

    counts, embeds, out = edit_plans(work, config, monkeypatch, edit)
    assert [spec["extractor"]["name"] for spec in embeds] == ["a"], embeds
    assert embeds[0]["fingerprint"] in out, "the dry run does not embed a's new fingerprint"
    # a's plan jobs (its embedding's, its score's, the comparison's and the report's), its one shard, merge and
    # score; nothing of b, c, the protocol or the retrieval benchmark
    assert counts == {"plan": 4, "embed_shard": 1, "merge_embeddings": 1, "score": 1, **REPORT_SIDE}, counts


def test_editing_one_retrieval_endpoint_file_reruns_only_its_candidate(done, monkeypatch):
    work, config = done

    def edit():
        path = work / "emb" / "qb_gallery.npz"
        return path, new_values(path, "embeddings")

    counts, embeds, out = edit_plans(work, config, monkeypatch, edit)
    # both of qb's endpoints: each endpoint's embedding recipe holds the digests of all the candidate's files
    assert sorted((spec["extractor"]["name"], spec["endpoint"]) for spec in embeds) == \
        [("qb", "gallery"), ("qb", "query")], embeds
    assert all(spec["fingerprint"] in out for spec in embeds), "the dry run does not embed qb's new fingerprints"
    assert counts == {"plan": 5, "embed_retrieval_shard": 2, "merge_retrieval_embeddings": 2, "score_retrieval": 1,
                      **REPORT_SIDE}, counts
