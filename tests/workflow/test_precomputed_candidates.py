"""Three precomputed embedding files compared in one labelled benchmark (and two in one retrieval benchmark, a file per
side), run with Snakemake; editing one file reruns only that candidate's jobs and the reports (issue 18, item 4)."""

from __future__ import annotations

import inspect

import h5py
import numpy as np
import pytest
from sklearn.datasets import load_digits
from workflow_support import job_counts, snakemake, write_config, written_report

from vertebrae.stages.common import embed_rows

HOOK = "offset" in inspect.signature(embed_rows).parameters
pytestmark = pytest.mark.skipif(not HOOK, reason="needs the stages to pass row ids to reads_rows extractors (issue 18)")

N_ROWS, N_QUERIES, N_GALLERY = 300, 20, 60


def write_files(root):
    """A labelled dataset (npz: labels and ids, its own features unused) and three embedding files of it in three
    formats, each in its own row order; retrieval query/gallery embeddings of two models, with qrels."""
    X, y = load_digits(return_X_y=True)
    X, y = X[:N_ROWS].astype(np.float32), y[:N_ROWS]
    ids = np.array([f"img-{i:04d}" for i in range(N_ROWS)])
    data = root / "data"
    data.mkdir()
    np.savez(data / "dataset.npz", embeddings=np.zeros((N_ROWS, 1), np.float32), labels=y, ids=ids)
    rng = np.random.default_rng(0)
    order = rng.permutation(N_ROWS)
    np.savez(data / "model_a.npz", embeddings=X[order], ids=ids[order])  # the pixels themselves
    with h5py.File(data / "model_b.h5", "w") as handle:  # a random projection
        handle["vectors"] = (X @ rng.normal(size=(64, 16)).astype(np.float32))[order[::-1]]
        handle["row_ids"] = ids[order[::-1]].astype("S")
    np.save(data / "model_c.npy", rng.normal(size=(N_ROWS, 8)).astype(np.float32))  # noise, no ids: the dataset's order
    # retrieval: gallery items of 6 topics, queries asking for one topic each
    topics = rng.normal(size=(6, 12))
    g_topic, q_topic = np.arange(N_GALLERY) % 6, np.arange(N_QUERIES) % 6
    q_ids, g_ids = np.array([f"q{i}" for i in range(N_QUERIES)]), np.array([f"d{i}" for i in range(N_GALLERY)])
    np.savez(data / "corpus.npz", queries=np.zeros((N_QUERIES, 1), np.float32), gallery=np.zeros((N_GALLERY, 1), np.float32),
             query_ids=q_ids, gallery_ids=g_ids)
    (data / "qrels.tsv").write_text("".join(f"q{q}\td{g}\t1\n" for q in range(N_QUERIES) for g in range(N_GALLERY)
                                            if q_topic[q] == g_topic[g]))
    for name, noise in (("good", 0.3), ("poor", 3.0)):
        np.savez(data / f"{name}_queries.npz", embeddings=topics[q_topic] + noise * rng.normal(size=(N_QUERIES, 12)),
                 ids=q_ids)
        np.savez(data / f"{name}_gallery.npz", embeddings=(topics[g_topic] + noise * rng.normal(size=(N_GALLERY, 12)))[::-1],
                 ids=g_ids[::-1])
    return X, ids, order


def config():
    side = lambda name, s: {"path": f"data/{name}_{s}.npz", "ids": "ids"}
    return {
        "seed": 0,
        "embedding": {"shards": 2, "batch_size": 64},
        "benchmarks": {
            "mine": {
                "dataset": {"source": {"type": "npz", "path": "data/dataset.npz", "ids_key": "ids"},
                            "identity": {"kind": "declared", "name": "digits-300", "revision": "1"}},
                "extractors": {
                    "model_a": {"type": "precomputed", "path": "data/model_a.npz", "ids": "ids"},
                    "model_b": {"type": "precomputed", "path": "data/model_b.h5", "dataset": "vectors", "ids": "row_ids"},
                    "model_c": {"type": "precomputed", "path": "data/model_c.npy"},
                },
                "scoring": {"k": 4},
            },
        },
        "retrieval": {
            "search": {
                "dataset": {
                    "source": {"type": "npz_pair", "path": "data/corpus.npz", "relevance_path": "data/qrels.tsv"},
                    "identity": {"kind": "declared", "name": "topics", "revision": "1"},
                },
                "shards": 1,
                "extractors": {name: {"type": "precomputed", "files": {"query": side(name, "queries"),
                                                                       "gallery": side(name, "gallery")}}
                               for name in ("good", "poor")},
            },
        },
    }


REPORT_RULES = {"report", "compare", "figures", "report_tables", "report_page", "leaderboard_page", "results_index",
                "summary", "all"}  # run after any candidate changes


def split_counts(counts):
    """(per-candidate job counts, report-side job counts) of a dry run."""
    return ({k: v for k, v in counts.items() if k not in REPORT_RULES},
            {k: v for k, v in counts.items() if k in REPORT_RULES})


def test_three_files_compared_and_one_edit_reruns_one_candidate(tmp_path):
    from vertebrae.core.artifacts import read_embeddings

    X = write_files(tmp_path)[0]
    write_config(tmp_path, config())
    counts = job_counts(snakemake(tmp_path, "-n", "--quiet", "rules").stdout)
    assert counts["embed_shard"] == 3 * 2 and counts["score"] == 3 and counts["score_retrieval"] == 2, counts
    snakemake(tmp_path)
    report = written_report(tmp_path, "mine")
    ranking = [r["name"] for r in report["extractor_results"]]
    assert sorted(ranking) == ["model_a", "model_b", "model_c"] and ranking[-1] == "model_c"  # noise ranks last
    dims = {r["name"]: r["embedding_metadata"]["dim"] for r in report["extractor_results"]}
    assert dims == {"model_a": 64, "model_b": 16, "model_c": 8}
    assert written_report(tmp_path, "search")["ranking"] == ["good", "poor"]
    assert job_counts(snakemake(tmp_path, "-n", "--quiet", "rules").stdout) == {}
    # each merged embedding holds the file's rows in the dataset's order (by id; model_c by position, over 2 shards)
    merged = [read_embeddings(p, fingerprint=p.stem) for p in (tmp_path / "results" / "embeddings").glob("*.h5")]
    by_dim = {a.matrix.shape[1]: a for a in merged}
    np.testing.assert_array_equal(by_dim[64].matrix, X)
    np.testing.assert_array_equal(by_dim[8].matrix, np.load(tmp_path / "data" / "model_c.npy"))

    # edit one labelled file: only model_b's plan / embed / merge / score jobs, then the report side
    with h5py.File(tmp_path / "data" / "model_b.h5", "r+") as handle:
        handle["vectors"][0, 0] = handle["vectors"][0, 0] + 1.0
    candidate, report_side = split_counts(job_counts(snakemake(tmp_path, "-n", "--quiet", "rules").stdout))
    # plan: model_b's embedding and score specs, the report's and the comparison's
    assert candidate == {"plan": 4, "embed_shard": 2, "merge_embeddings": 1, "score": 1}, candidate
    assert report_side.get("report") == 1 and set(report_side.values()) == {1}, report_side

    # edit one retrieval side file too: that candidate's query and gallery embeddings (its recipe names both files)
    # and score, and the retrieval report
    np.savez(tmp_path / "data" / "poor_gallery.npz", embeddings=np.ones((N_GALLERY, 12)) + np.arange(N_GALLERY)[:, None],
             ids=np.array([f"d{i}" for i in range(N_GALLERY)]))
    candidate, report_side = split_counts(job_counts(snakemake(tmp_path, "-n", "--quiet", "rules").stdout))
    assert candidate == {"plan": 4 + 5, "embed_shard": 2, "merge_embeddings": 1, "score": 1, "embed_retrieval_shard": 2,
                         "merge_retrieval_embeddings": 2, "score_retrieval": 1}, candidate
    assert report_side.get("report") == 2, report_side

    before = {r["name"]: r["embedding_metadata"]["fingerprint"] for r in report["extractor_results"]}
    snakemake(tmp_path)
    after = {r["name"]: r["embedding_metadata"]["fingerprint"] for r in written_report(tmp_path, "mine")["extractor_results"]}
    assert after["model_a"] == before["model_a"] and after["model_c"] == before["model_c"]
    assert after["model_b"] != before["model_b"]
    assert written_report(tmp_path, "search")["ranking"][0] == "good"


def test_missing_ids_refuse_the_plan_naming_file_and_ids(tmp_path):
    write_files(tmp_path)
    ids = np.array([f"img-{i:04d}" for i in range(N_ROWS)])
    np.savez(tmp_path / "data" / "model_a.npz", embeddings=np.zeros((N_ROWS - 2, 3), np.float32), ids=ids[2:])
    write_config(tmp_path, config())
    proc = snakemake(tmp_path, "-n", check=False)
    assert proc.returncode != 0
    text = proc.stdout + proc.stderr
    assert "model_a.npz" in text and "'img-0000'" in text and "benchmarks.mine.extractors.model_a" in text
