"""A BEIR folder through the workflow (issue 27): ``vertebrae validate`` and ``vertebrae run`` on a config whose
retrieval dataset is ``source: {type: beir}`` with precomputed embedding files per endpoint, equal to the same data
given as an ``npz_pair`` and to the in-process ``RetrievalDataset.from_beir`` run; a broken qrels file is refused by
validate, naming its file and line, before any job runs."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.beir_fixtures import jsonl
from vertebrae.extractors.precomputed import PrecomputedFileExtractor
from vertebrae.data.retrieval import RetrievalDataset
from vertebrae.protocols.retrieval import RetrievalBenchmark
from workflow_support import BIN

N_DOCS, N_QUERIES, DIM = 24, 8, 6


def vertebrae(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(BIN / "vertebrae"), *args], cwd=cwd, capture_output=True, text=True, timeout=600)
    if check:
        assert proc.returncode == 0, f"vertebrae {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def write_data(root: Path) -> dict:
    """A BEIR folder, the embeddings of each side as .npz files with ids, and the same rows as one npz_pair with the
    same qrels; returns the config comparing both."""
    rng = np.random.default_rng(27)
    doc_ids = [f"doc{i}" for i in range(N_DOCS)]
    query_ids = [f"q{i}" for i in range(N_QUERIES + 2)]  # q8, q9: no qrels in the test split: not queries
    gallery = rng.normal(size=(N_DOCS, DIM))
    queries = gallery[: N_QUERIES + 2] + 0.8 * rng.normal(size=(N_QUERIES + 2, DIM))
    beir = root / "data" / "beir"
    (beir / "qrels").mkdir(parents=True)
    (beir / "corpus.jsonl").write_text(jsonl({"_id": d, "title": f"T{i}", "text": f"text {i}"}
                                             for i, d in enumerate(doc_ids)), encoding="utf-8")
    (beir / "queries.jsonl").write_text(jsonl({"_id": q, "text": f"query {i}"} for i, q in enumerate(query_ids)),
                                        encoding="utf-8")
    lines = [f"q{i}\tdoc{i}\t2\n" for i in range(N_QUERIES)] + [f"q{i}\tdoc{i + 8}\t1\n" for i in range(0, N_QUERIES, 2)]
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(lines), encoding="utf-8")
    (beir / "qrels" / "dev.tsv").write_text("query-id\tcorpus-id\tscore\nq8\tdoc3\t1\n", encoding="utf-8")
    emb = root / "emb"
    emb.mkdir()
    order = rng.permutation(N_DOCS)  # the gallery file in its own order: aligned by id
    np.savez(emb / "corpus.npz", embeddings=gallery[order], ids=np.array(doc_ids)[order])
    # the query file holds the split's queries: a precomputed file holds exactly its endpoint's rows
    np.savez(emb / "queries.npz", embeddings=queries[:N_QUERIES], ids=np.array(query_ids[:N_QUERIES]))
    np.savez(root / "data" / "pair.npz", queries=queries[:N_QUERIES], gallery=gallery,
             query_ids=np.array(query_ids[:N_QUERIES]), gallery_ids=np.array(doc_ids))
    (root / "data" / "qrels.tsv").write_text("".join(lines), encoding="utf-8")
    for path in [*root.rglob("*")]:  # written a minute ago: past the digest cache's racy window
        if path.is_file():
            os.utime(path, (time.time() - 60, time.time() - 60))
    files = {"query": {"path": "emb/queries.npz", "ids": "ids"}, "gallery": {"path": "emb/corpus.npz", "ids": "ids"}}
    return {
        "embedding": {"shards": 1, "batch_size": 64},
        "retrieval": {
            "as_beir": {"dataset": {"source": {"type": "beir", "path": "data/beir"}},  # split: test (default)
                        "extractors": {"model": {"type": "precomputed", "files": files}}},
            "as_npz": {"dataset": {"source": {"type": "npz_pair", "path": "data/pair.npz",
                                              "relevance_path": "data/qrels.tsv"}},
                       "extractors": {"model": {"type": "precomputed"}}},
        },
    }


@pytest.fixture(scope="module")
def done(tmp_path_factory) -> Path:
    workdir = tmp_path_factory.mktemp("beir-run")
    config = write_data(workdir)
    (workdir / "beir.yaml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    checked = vertebrae(workdir, "validate", "beir.yaml")
    assert "valid; 2 benchmarks" in checked.stdout
    vertebrae(workdir, "run", "beir.yaml", "--cores", "2")
    return workdir


def _report(workdir: Path, name: str) -> dict:
    return json.loads((workdir / "results/reports" / name / "report.json").read_text(encoding="utf-8"))


def _numbers(report: dict) -> dict:
    (candidate,) = report["candidate_results"]
    return {"primary": candidate["primary_score"], "metrics": candidate["score"]["forward"]["metrics"],
            "per_query": candidate["score"]["forward"].get("per_query")}


def test_beir_and_npz_pair_give_the_same_report_numbers(done):
    beir, npz = _report(done, "as_beir"), _report(done, "as_npz")
    assert _numbers(beir) == _numbers(npz)
    assert beir["dataset_summary"]["n_queries"] == N_QUERIES and beir["dataset_summary"]["n_gallery"] == N_DOCS
    assert 0.3 < _numbers(beir)["primary"] < 1.0  # neither chance nor trivially perfect


def test_the_in_process_from_beir_run_gives_the_same_numbers(done, monkeypatch):
    monkeypatch.chdir(done)
    dataset = RetrievalDataset.from_beir("data/beir")
    extractor = PrecomputedFileExtractor("model", {"query": {"path": "emb/queries.npz", "ids": "ids"},
                                                   "gallery": {"path": "emb/corpus.npz", "ids": "ids"}})
    result = RetrievalBenchmark(dataset, [extractor], name="as_beir").run().to_dict()
    assert _numbers(result) == _numbers(_report(done, "as_beir"))
    assert result["dataset_summary"]["identity"] == _report(done, "as_beir")["dataset_summary"]["identity"]


def test_validate_refuses_a_broken_qrels_file_before_any_job(tmp_path):
    config = write_data(tmp_path)
    (tmp_path / "beir.yaml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    qrels = tmp_path / "data/beir/qrels/test.tsv"
    qrels.write_text(qrels.read_text(encoding="utf-8") + "q1\tdoc99\t1_0\n", encoding="utf-8")
    proc = vertebrae(tmp_path, "validate", "beir.yaml", check=False)
    assert proc.returncode == 2
    assert "test.tsv: line 14: grade '1_0' is not a number" in proc.stderr
    qrels.write_text("query-id\tcorpus-id\tscore\nq1\tdoc99\t1\n", encoding="utf-8")
    proc = vertebrae(tmp_path, "validate", "beir.yaml", check=False)
    assert proc.returncode == 2 and "1 record(s) name 1 gallery id(s) absent from" in proc.stderr
    assert "'doc99' (line 2)" in proc.stderr
    # no job ran: the out folder holds the run's own state only (results/.vertebrae: digests, plans, spec files)
    assert [p.name for p in (tmp_path / "results").iterdir()] == [".vertebrae"]


def _planned(workdir: Path) -> dict[str, int]:
    from workflow_support import job_counts, snakemake

    return job_counts(snakemake(workdir, "--configfile", "beir.yaml", "-n", "--quiet", "rules").stdout)


EMBEDDING_RULES = {"embed_retrieval_shard", "merge_retrieval_embeddings", "fit_extractor"}


def test_a_relevance_edit_rescores_and_a_corpus_edit_reembeds_the_gallery_only(done, tmp_path):
    """Issue 27: an embedding is named by the rows it embeds, not by the relevance or the other endpoint."""
    import shutil

    work = tmp_path / "copy"
    shutil.copytree(done, work, symlinks=True)
    assert _planned(work) == {}
    qrels = work / "data/beir/qrels/test.tsv"
    lines = qrels.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[1] = lines[1].replace("\t2\n", "\t1\n")  # one grade of q0 edited: the split's queries are the same
    qrels.write_text("".join(lines), encoding="utf-8")
    after_qrels = _planned(work)
    assert not EMBEDDING_RULES & set(after_qrels), after_qrels  # no embed, no merge: nothing re-embedded
    assert after_qrels["write_retrieval_relevance"] == 1 and after_qrels["score_retrieval"] == 1, after_qrels
    assert after_qrels["report"] == 1 and after_qrels["compare"] == 1, after_qrels  # as_beir's only

    shutil.rmtree(work)
    shutil.copytree(done, work, symlinks=True)
    corpus = work / "data/beir/corpus.jsonl"
    corpus.write_text(corpus.read_text(encoding="utf-8").replace('"text 3"', '"text three"'), encoding="utf-8")
    after_corpus = _planned(work)
    # the gallery side only: its one shard and its merge; the queries' embedding stays (the relevance protocol,
    # keyed by the whole dataset's identity, is written again: same ids and grades)
    assert after_corpus.get("embed_retrieval_shard") == 1 and after_corpus.get("merge_retrieval_embeddings") == 1, \
        after_corpus
    assert after_corpus["score_retrieval"] == 1, after_corpus
    digests = json.loads((work / "results/.vertebrae/digests.json").read_text(encoding="utf-8"))
    assert {"corpus.jsonl", "queries.jsonl", "test.tsv"} <= {Path(p).name for p in digests["files"]}
