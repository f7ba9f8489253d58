"""``retrieval.conventions: trec_eval`` through Snakemake: a fanned-out candidate (two gallery shards, so ties
across the shard edge are decided by the gallery ids each partial job looks up) on integer embeddings full of
exact score ties; the report equals pytrec_eval, equals the in-process run, and names its conventions."""

from __future__ import annotations

import json

import numpy as np
import pytest

from vertebrae.planning import retrieval_benchmarks_from_config
from workflow_support import comparable, job_counts, snakemake, write_config


def test_trec_eval_conventions_in_a_workflow_equal_pytrec_eval(tmp_path):
    pytrec_eval = pytest.importorskip("pytrec_eval")
    rng = np.random.default_rng(49)
    nq, ng = 24, 80
    queries = rng.integers(-1, 2, size=(nq, 4)).astype(np.float32)
    gallery = rng.integers(-1, 2, size=(ng, 4)).astype(np.float32)
    qids = [f"q{i}" for i in range(nq)]
    gids = [f"g{p}" for p in rng.permutation(ng)]  # text order ("g10" < "g9") is not row order
    (tmp_path / "data").mkdir()
    np.savez(tmp_path / "data/pair.npz", queries=queries, gallery=gallery, query_ids=np.array(qids),
             gallery_ids=np.array(gids))
    qrels: dict[str, dict[str, int]] = {q: {} for q in qids}
    for i, q in enumerate(qids):
        for j in rng.choice(ng, 4, replace=False):
            qrels[q][gids[j]] = int(rng.integers(1, 4))
    lines = [f"{q}\t{g}\t{grade}" for q, docs in qrels.items() for g, grade in docs.items()]
    (tmp_path / "data/qrels.tsv").write_text("\n".join(lines) + "\n")
    config = {
        "embedding": {"shards": 1},
        "retrieval": {"ties": {
            "dataset": {"source": {"type": "npz_pair", "path": "data/pair.npz", "relevance_path": "data/qrels.tsv"},
                        "identity": {"kind": "declared", "name": "tied-pairs", "revision": "1"}},
            "extractors": {"raw": {"type": "precomputed"}},
            "retrieval": {"similarity": "dot", "conventions": "trec_eval", "ks": [1, 5, 10, 50],
                          "gallery_block_size": 16},
            "scoring": {"gallery_shards": 2},
        }},
    }
    write_config(tmp_path, config)
    assert job_counts(snakemake(tmp_path, "-n", "--quiet", "rules").stdout)["score_retrieval_partial"] == 2
    snakemake(tmp_path)
    written = json.loads((tmp_path / "results/reports/ties/report.json").read_text())
    assert written["metadata"]["conventions"] == "trec_eval"
    expected = retrieval_benchmarks_from_config(config, base_dir=tmp_path)["ties"].run().to_dict()
    assert comparable(written) == comparable(expected)
    forward = written["candidate_results"][0]["score"]["forward"]
    assert forward["metadata"]["conventions"] == "trec_eval" and forward["n_queries_with_ties"] > 10
    S = queries.astype(np.float64) @ gallery.astype(np.float64).T
    run = {q: {g: float(S[i, j]) for j, g in enumerate(gids)} for i, q in enumerate(qids)}
    oracle = pytrec_eval.RelevanceEvaluator(qrels, {"map", "recip_rank", "ndcg_cut.1,5,10,50", "P.1,5,10,50",
                                                    "recall.1,5,10,50", "success.1,5,10,50"}).evaluate(run)
    names = {"map": "map", "mrr": "recip_rank"}
    for k in (1, 5, 10, 50):
        names.update({f"ndcg@{k}": f"ndcg_cut_{k}", f"precision@{k}": f"P_{k}", f"recall@{k}": f"recall_{k}",
                      f"hit_rate@{k}": f"success_{k}"})
    for ours, theirs in names.items():
        assert forward["metrics"][ours] == pytest.approx(np.mean([oracle[q][theirs] for q in qids]), abs=1e-12), ours
    markdown = (tmp_path / "results/reports/ties/report.md").read_text()
    assert "Conventions: trec_eval (as trec_eval 9 / pytrec_eval computes them)" in markdown
