"""Issue 18's Done-when, locally: three precomputed embedding files compared in one labelled benchmark and three
per-endpoint pairs in one retrieval benchmark (``three_files_config``: an .npz, an .h5 and an .npy + ids file, rows
in their own orders, no identity declared) run with ``vertebrae run``; each merged embedding holds its file's rows in
the dataset's order (by id, or by position for a file without ids); editing one file in place then plans only its
candidate's embedding, merge and score jobs, and the comparison, report and summary, and running it rebuilds only
that candidate's embedding; a file missing rows is refused at plan time, naming the file, the row and the config key.
(On SLURM: test_slurm.py.)"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import h5py
import numpy as np
import pytest
import yaml

from vertebrae.planning import plan
from workflow_support import BIN, job_counts, three_files_config

REPORT_SIDE = {"compare": 1, "report": 1, "figures": 1, "report_tables": 1, "report_page": 1,
               "leaderboard_page": 1, "results_index": 1, "summary": 1, "all": 1}


def vertebrae(work: Path, *args: str, check: bool = True) -> str:
    """``vertebrae ARGS`` in ``work``, the test environment's bin folder first on PATH (an activated environment);
    with ``check``, it must exit 0."""
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    proc = subprocess.run([str(BIN / "vertebrae"), *args], cwd=work, env=env, capture_output=True, text=True,
                          timeout=600)
    if check:
        assert proc.returncode == 0, f"vertebrae {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-4000:]}"
    else:
        assert proc.returncode != 0, f"vertebrae {' '.join(args)} exited 0:\n{proc.stdout[-3000:]}"
    return proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def done(tmp_path_factory) -> tuple[Path, dict]:
    """A directory where ``vertebrae run my.yaml --cores 2`` has run the three-files config to the end."""
    work = tmp_path_factory.mktemp("three-files")
    config = three_files_config(work)
    # 3 classes: each score job resamples rows, one OverlapIndex fit per subsample; 20 (the least), not 200
    config["benchmarks"]["models"]["row_resampling"] = {"resamples": 20}
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


def in_dataset_order(matrix: np.ndarray, file_ids, dataset_ids) -> np.ndarray:
    """The rows of ``matrix`` (one per id of ``file_ids``, in the file's order) in the order of ``dataset_ids``."""
    where = {str(i.decode() if isinstance(i, bytes) else i): row for row, i in enumerate(file_ids)}
    return matrix[[where[str(i)] for i in dataset_ids]]


def test_each_merged_embedding_holds_its_files_rows_in_the_datasets_order(done):
    from vertebrae.core.artifacts import read_embeddings

    work, _ = done
    emb = work / "emb"
    ids = np.load(work / "data" / "rows.npz")["ids"]
    a = np.load(emb / "a.npz")
    with h5py.File(emb / "b.h5", "r") as handle:
        b = handle["vectors"][()], handle["row_ids"][()]
    c = np.load(emb / "c.npy"), (emb / "c_ids.txt").read_text(encoding="utf-8").split()
    expected = {"a": in_dataset_order(a["embeddings"], a["ids"], ids), "b": in_dataset_order(*b, ids),
                "c": in_dataset_order(*c, ids)}
    for result in report(work, "models")["extractor_results"]:
        fp = result["embedding_metadata"]["fingerprint"]
        merged = read_embeddings(work / "results" / "embeddings" / f"{fp}.h5", fingerprint=fp)
        assert list(merged.row_ids) == [str(i) for i in ids], result["name"]
        np.testing.assert_array_equal(merged.matrix, expected[result["name"]], err_msg=result["name"])
    pair = np.load(work / "data" / "pair.npz")
    qa, qc = (next(r for r in report(work, "search")["candidate_results"] if r["name"] == name)["embedding_metadata"]
              for name in ("qa", "qc"))
    stored = work / "results" / "retrieval" / "embeddings"
    query = read_embeddings(stored / f"{qa['query_fingerprint']}.h5", fingerprint=qa["query_fingerprint"])
    qa_file = np.load(emb / "qa_query.npz")
    np.testing.assert_array_equal(query.matrix, in_dataset_order(qa_file["embeddings"], qa_file["ids"], pair["query_ids"]))
    gallery = read_embeddings(stored / f"{qc['gallery_fingerprint']}.h5", fingerprint=qc["gallery_fingerprint"])
    np.testing.assert_array_equal(gallery.matrix, np.load(emb / "qc_gallery.npy"))  # no ids: by position
    assert list(gallery.row_ids) == [str(i) for i in pair["gallery_ids"]]


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


def test_a_file_missing_rows_is_refused_at_plan_time(tmp_path):
    config = three_files_config(tmp_path)
    (tmp_path / "my.yaml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    ids = np.load(tmp_path / "data" / "rows.npz")["ids"]
    np.savez(tmp_path / "emb" / "a.npz", embeddings=np.zeros((len(ids) - 2, 8), np.float32), ids=ids[2:])
    text = vertebrae(tmp_path, "run", "my.yaml", "-n", check=False)
    assert "a.npz" in text and f"'{ids[0]}'" in text and "benchmarks.models.extractors.a" in text, text[-3000:]


def test_running_after_an_edit_rebuilds_only_the_edited_candidate(done):
    """Last in the module: it leaves the edit in place. Only a's embedding (and so its score) is new; the
    rankings still hold (a's noise ranks last now)."""
    work, _ = done
    fingerprints = lambda: {r["name"]: r["embedding_metadata"]["fingerprint"]
                            for r in report(work, "models")["extractor_results"]}
    before = fingerprints()
    new_values(work / "emb" / "a.npz", "embeddings")
    vertebrae(work, "run", "my.yaml", "--cores", "2")
    after = fingerprints()
    assert after["a"] != before["a"] and {k: after[k] for k in "bc"} == {k: before[k] for k in "bc"}, (before, after)
    assert report(work, "models")["ranking"][-1] == "a" and report(work, "search")["ranking"] == ["qa", "qb", "qc"]
    assert "Nothing to be done" in vertebrae(work, "run", "my.yaml", "-n")
