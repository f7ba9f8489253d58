"""A retrieval benchmark through Snakemake (bidirectional, with a compressed variant and a branch-free learning
extractor fitted on the gallery) against the in-process RetrievalBenchmark for the same config."""

from __future__ import annotations

import json

import numpy as np

from vertebrae.planning import retrieval_benchmarks_from_config
from workflow_support import comparable, job_counts, snakemake, write_config


def test_bidirectional_compressed_retrieval_workflow_matches_in_process(tmp_path):
    rng = np.random.default_rng(3)
    n_queries, n_gallery, dim = 60, 90, 12
    gallery = rng.normal(size=(n_gallery, dim)).astype(np.float32)
    targets = rng.integers(0, n_gallery, size=n_queries)
    queries = (gallery[targets] + 0.3 * rng.normal(size=(n_queries, dim))).astype(np.float32)
    (tmp_path / "data").mkdir()
    np.savez(tmp_path / "data/pair.npz", queries=queries, gallery=gallery,
             query_ids=np.array([f"q{i}" for i in range(n_queries)]), gallery_ids=np.array([f"g{i}" for i in range(n_gallery)]))
    lines = [f"q{i}\tg{t}\t2" for i, t in enumerate(targets)]
    lines += [f"q{i}\tg{(t + 1) % n_gallery}\t1" for i, t in enumerate(targets)]
    # every gallery item needs a reverse positive for the bidirectional score
    lines += [f"q{i % n_queries}\tg{g}\t1" for i, g in enumerate(sorted(set(range(n_gallery)) - set(targets) - set((targets + 1) % n_gallery)))]
    (tmp_path / "data/qrels.tsv").write_text("\n".join(dict.fromkeys(lines)) + "\n")
    config = {
        "embedding": {"shards": 3, "batch_size": 16},
        "retrieval": {
            "pairs": {
                "dataset": {
                    "source": {"type": "npz_pair", "path": "data/pair.npz", "relevance_path": "data/qrels.tsv"},
                    "identity": {"kind": "declared", "name": "synthetic-pairs", "revision": "1"},
                },
                "extractors": {
                    "raw": {"type": "precomputed"},
                    "pca6": {"type": "sklearn", "steps": [{"estimator": "sklearn.decomposition.PCA", "params": {"n_components": 6}}]},
                },
                "compression": {"method": "quantize", "precision": "int8"},
                "retrieval": {"bidirectional": True, "ks": [1, 5, 10], "query_block_size": 7, "gallery_block_size": 20},
            },
        },
    }
    write_config(tmp_path, config)
    counts = job_counts(snakemake(tmp_path, "-n", "--quiet", "rules").stdout)
    assert counts["embed_retrieval_shard"] == 2 * 2 * 3 and counts["score_retrieval"] == 4 and counts["fit_extractor"] == 1
    snakemake(tmp_path)
    written = json.loads((tmp_path / "results/reports/pairs/report.json").read_text())
    expected = retrieval_benchmarks_from_config(config, base_dir=tmp_path)["pairs"].run().to_dict()
    assert comparable(written) == comparable(expected)
    names = [c["name"] for c in written["candidate_results"]]
    assert names == ["raw", "raw[quantize_int8]", "pca6", "pca6[quantize_int8]"]
    raw = written["candidate_results"][0]["score"]
    assert raw["reverse"] is not None
    assert raw["primary_score"] == (raw["forward"]["score"] + raw["reverse"]["score"]) / 2
    assert raw["forward"]["metrics"]["mrr"] > 0.5  # queries are noisy copies of their target
    assert written["candidate_results"][1]["compression_metadata"]["fit_side"] == "gallery"
